# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""`steward-etcd-member`: the program that runs beside each etcd of an `Etcd` resource (etcd-backup-restore's
role in etcd-druid), on the collection's engine.

  initializer.py  before etcd starts: validate the data dir, decide (etcd/recovery/initialization.py, druid's
                  table) and carry the decision out with the engine's restore and membership calls
  server.py       druid's HTTP endpoints, where etcd's wrapper calls them: /initialization/start,
                  /initialization/status, /config, /healthz, /snapshot/latest
  main.py         flags (etcdbrctl's names where it has one) and the process

Not a controller loop: it is its own entry point and imports no kopf.
"""
