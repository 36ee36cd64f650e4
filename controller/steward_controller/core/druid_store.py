# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""A druid StoreSpec's store, opened with its Secret's credentials: one home for the loops that read druid stores
(the etcd-tasks loop's copy, compaction and operator tasks; the etcd loop's quorum-loss recovery)."""

from __future__ import annotations

from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.druid_store import DruidStore, credentials
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.store import SnapshotStore
from ansible_collections.steward.cluster.plugins.module_utils.etcd.store.stores import open_store
from ansible_collections.steward.cluster.plugins.module_utils.kube.secrets import read_secret

from steward_controller.core.runtime import Runtime


def open_druid_store(runtime: Runtime, namespace: str, store: DruidStore, field: str) -> SnapshotStore:
    """The store with its Secret's credentials, read by name without the opt-in label: a druid StoreSpec names no
    endpoint of its own, the endpoint is the Secret's (docs/etcd-druid.md)."""
    found = credentials(read_secret(runtime.client, namespace, store.secret, field + '.secretRef', opt_in=False)
                        if store.secret else {})
    return open_store(store.url, endpoint_url=found.endpoint, access_key=found.access_key,
                      secret_key=found.secret_key, session_token=found.session_token, region=found.region)


def local_root(runtime: Runtime) -> str:
    """--local-store-root of the etcd-tasks loop (where druid's `local` containers live)."""
    options = runtime.settings.loop_options.get('etcd-tasks')
    return getattr(options, 'local_store_root', '') or ''
