# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bringing a cluster back: decide the least destructive way, then each host does its part.

  recovery.py        the recovery plan from per-host facts (pure): keep, rejoin, or restore everywhere
  recovery_steps.py  one host's part of the plan, carried out on that host (member/ and cluster/ underneath)
  initialization.py  what a member does with its data dir before etcd starts: druid's table (pure), data-dir validation
  restore.py         a member's data dir restored from a verified full snapshot and its deltas (snapshot/ replays them)
"""
