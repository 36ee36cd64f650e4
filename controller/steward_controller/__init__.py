# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""steward.cluster's long-running controller: kopf handlers over the collection's engine.

Run with `python -m steward_controller`. The engine lives in
`ansible_collections.steward.cluster.plugins.module_utils`; everything here is a thin adapter
(read the custom resource, call the engine, write status, post events, export metrics).
"""

GROUP = 'cluster.steward.io'
VERSION = 'v1alpha1'
API_VERSION = GROUP + '/' + VERSION
