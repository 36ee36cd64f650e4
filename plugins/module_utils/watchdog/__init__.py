# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Dependency watchdog (seed 004, gardener's dependency-watchdog): the prober scales dependents down when their
cluster's API server or node leases fail and back up when they recover; the weeder restarts pods stuck on a
dependency that came back (CrashLoopBackOff). DWD's own config files are read unchanged.

Config: constants.py (DWD's names and defaults), fields.py (its YAML read as its Go code reads it),
  prober_config.py, weeder_config.py
Prober, pure: probe.py (one probe, as DWD runs it), leases.py (the node-lease verdict), decision.py (hysteresis:
  verdicts into scale-down or scale-up), plan.py (what happens to each target, level by level)
Prober, acting: targets.py (the dependents, found by API discovery), scaler.py (a plan applied level by level),
  status.py (the prober's status ConfigMap), oneshot.py (one probe now: watchdog_probe)
Weeder: weeder.py (which pods to delete, and when, pure)
errors.py: what goes wrong while acting, by what the caller does about it.
"""
