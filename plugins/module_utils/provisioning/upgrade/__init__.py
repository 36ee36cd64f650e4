# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes version upgrades of provisioned clusters (`steward.cluster.cluster_upgrade`).

  versions.py   Kubernetes versions and the version skew policy as data (kubernetes.io/releases/version-skew-policy)
  installed.py  what is installed, read from plain data: static-pod manifests' image tags, mirror pods, Nodes'
                `status.nodeInfo.kubeletVersion`, `kubelet --version`
  plan.py       the plan from what is installed to the target: hops one minor at a time, steps in an order that
                never breaks the skew policy, typed refusals naming the rule; `skew_violations` checks any state
  record.py     the per-node record of a run (the `cluster.steward.io/upgrade` annotation on each Node): what a
                second run, or another operator, reads to resume without draining a node twice
  run.py        one node's step, acting through a small ops interface (the module's files, API and commands)

Everything but run.py is pure. Refusals are `errors.Refused` with a stable `rule`.
"""
