# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""steward.cluster's long-running controller: kopf handlers over the collection's engine.

Run with `steward-controller` (or `python -m steward_controller`); `--controllers` selects the loops.
The engine lives in `ansible_collections.steward.cluster.plugins.module_utils`; everything here is a
thin adapter (read the custom resource, call the engine, write status, post events, export metrics).

Layout: `core/` is the runtime every loop shares (flags, loop registry, leader election, metrics,
logs); each loop has its own subpackage (`etcd_backup/`, `sabakan/`, `maintenance/`, ...) whose
`__init__` declares it (see core/loops.py).
"""

__version__ = '0.1.0'


GROUP = 'cluster.steward.io'
VERSION = 'v1alpha1'
API_VERSION = GROUP + '/' + VERSION
