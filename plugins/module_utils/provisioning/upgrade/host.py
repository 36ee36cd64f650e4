# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ops run.py acts through, on a real host (or a lab root): the node's static-pod manifests below `root`, the
Kubernetes API (mirror pods, the Node, the drain) and the kubelet install command. Also `read_installed`, the
Installed view the module plans from. Commands run through a Runner (argv -> CompletedProcess): the module passes
Ansible's `run_command`, so nothing here imports AnsibleModule.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import subprocess
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.commands import run_bounded
from ansible_collections.steward.cluster.plugins.module_utils.common.files import write_atomic
from ansible_collections.steward.cluster.plugins.module_utils.common.systemd import answer, systemctl
from ansible_collections.steward.cluster.plugins.module_utils.kube import drain as kube_drain
from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient, api_path
from ansible_collections.steward.cluster.plugins.module_utils.kube.errors import BadAnswer, KubeError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning import layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import ProvisioningError
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.files import Root
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.manifests import INPUTS_ANNOTATION
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.render import from_yaml, to_yaml
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade import installed as inst
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade import pools
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade import renewal
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.plan import Installed
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.record import ANNOTATION, Record
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.versions import (
    Version, kubelet_version, with_tag,
)

Runner = Callable[[List[str]], 'subprocess.CompletedProcess[str]']
COMMAND_TIMEOUT = 600.0
KUBE_SYSTEM = 'kube-system'
MANIFEST_MODE = 0o600


def default_runner(argv: List[str]) -> 'subprocess.CompletedProcess[str]':
    return run_bounded(argv, COMMAND_TIMEOUT)


@dataclasses.dataclass
class DrainOptions:
    timeout: float = 600.0
    eviction_timeout: float = 120.0
    force: bool = False
    protected_namespaces: Tuple[str, ...] = ()


def read_local_images(root: str) -> Dict[str, Optional[str]]:
    """{component: image} of the static-pod manifests below `root` (None for a component without one)."""
    out: Dict[str, Optional[str]] = {}
    for component in inst.COMPONENTS:
        path = layout.host_path(root, layout.MANIFEST[component])
        try:
            with open(path, 'rb') as f:
                out[component] = inst.manifest_image(f.read(), path)
        except OSError:
            out[component] = None
    return out


def binary_version(root: str, binary: str, run: Runner) -> Optional[Version]:
    """What the host's kubelet install names: `<kubelet_binary> --version` (`Kubernetes v1.31.4`)."""
    path = layout.host_path(root, binary)
    if not os.path.exists(path):
        return None
    try:
        done = run([path, '--version'])
    except OSError:
        return None
    return kubelet_version(done.stdout) if done.returncode == 0 else None


def read_installed(client: KubeClient, control_plane: Sequence[str], workers: Sequence[str], *,
                   local_node: Optional[str] = None, root: Optional[str] = None,
                   kubelet_binary: str = '/usr/bin/kubelet', run: Runner = default_runner,
                   machine_deployments: Sequence[str] = ()) -> Tuple[Installed, Dict]:
    """The Installed view and the Node objects (by name) it was read from; `machine_deployments` (namespace/name)
    are the cloud pools (pools.py): their machines' Nodes join the view as workers of their pool."""
    nodes = {}
    for name in list(control_plane) + list(workers):
        obj = client.get_or_none(api_path('v1', 'nodes', name=name))
        if obj is not None:
            nodes[name] = obj
    pods = client.list(api_path('v1', 'pods', KUBE_SYSTEM), label_selector='component')
    proxy = client.get_or_none(api_path('apps/v1', 'daemonsets', KUBE_SYSTEM, 'kube-proxy'))
    local_images = read_local_images(root) if root is not None and local_node else None
    local_kubelet = binary_version(root, kubelet_binary, run) if root is not None and local_node else None
    view = inst.installed_from(control_plane, workers, nodes=nodes, mirror_pods=pods, local_node=local_node,
                               local_images=local_images, local_kubelet=local_kubelet, kube_proxy=proxy)
    if machine_deployments:
        found, pool_nodes, objects = pools.read_pools(client, machine_deployments)
        view = Installed(pools.with_pools(view.nodes, pool_nodes), view.kube_proxy, tuple(found))
        nodes.update(objects)
    return view, nodes


class HostOps:
    """run.py's ops for the node the module runs on."""

    def __init__(self, *, node_name: str, root: str, client: KubeClient, kubelet_binary: str,
                 install_command: Sequence[str], manage_kubelet: bool, drain: DrainOptions, run: Runner = default_runner,
                 maintenance: bool = False, renew_before_days: Optional[int] = None, cert_days: int = 365):
        self.node_name = node_name
        # certificates of the restarted static pods ending within this many days are renewed first (renewal.py);
        # None: none are
        self.renew_before_days = renew_before_days
        self.cert_days = cert_days
        self.maintenance = maintenance   # the kubelet step runs only while the node is in-maintenance (run.py)
        self.root = root
        self.client = client
        self.kubelet_binary = kubelet_binary
        self.install_command = list(install_command)
        self.manage_kubelet = manage_kubelet
        self.drain_options = drain
        self.run = run
        self.node_path = api_path('v1', 'nodes', name=node_name)

    # --- control plane ---------------------------------------------------------------------------
    def set_image(self, component: str, version: Version) -> bool:
        """Rewrite the component's manifest with the image tag of `version` (everything else kept); False when it
        names that image already."""
        path = layout.host_path(self.root, layout.MANIFEST[component])
        try:
            with open(path, 'rb') as f:
                doc = from_yaml(f.read(), path)
            container = doc['spec']['containers'][0]
        except (OSError, KeyError, IndexError, TypeError) as exc:
            raise ProvisioningError('cannot read the %s manifest %s: %s' % (component, path, exc), path) from None
        image = with_tag(str(container.get('image', component)), version)
        if container.get('image') == image:
            return False
        container['image'] = image
        annotations = (doc.get('metadata') or {}).get('annotations') or {}
        inputs = renewal.inputs_digest(Root(self.root).read, component)
        if INPUTS_ANNOTATION in annotations and inputs is not None:
            annotations[INPUTS_ANNOTATION] = inputs   # the certificates renewed on the way (renewal.py), if any
        write_atomic(path, to_yaml(doc), MANIFEST_MODE)
        return True

    def certificates_due(self, kind: str, now: datetime.datetime) -> List[renewal.Due]:
        """The certificates this step's pods read that end within renew_before_days (none when renewal is off)."""
        if self.renew_before_days is None:
            return []
        return renewal.due(Root(self.root).read, kind, now, self.renew_before_days)

    def renew_certificates(self, due: List[renewal.Due], now: datetime.datetime) -> None:
        """Write the renewed certificates (each file atomically, its mode kept) before the manifest changes."""
        root = Root(self.root)
        for path, content in renewal.renewed(root.read, due, now, self.cert_days).items():
            write_atomic(root.host(path), content, root.mode(path) or 0o600)

    def reported(self, component: str) -> Tuple[Optional[str], bool]:
        pod = self.client.get_or_none(api_path('v1', 'pods', KUBE_SYSTEM, '%s-%s' % (component, self.node_name)))
        return (inst.pod_image(pod), inst.pod_ready(pod)) if pod else (None, False)

    def apiserver_ready(self) -> bool:
        try:
            self.client.request('GET', '/readyz')
        except BadAnswer:
            return True    # 200 with the plain-text `ok` (not JSON): ready
        except KubeError:
            return False
        return True

    # --- the Node ----------------------------------------------------------------------------------
    def get_node(self) -> Dict[str, Any]:
        return self.client.get(self.node_path)

    def annotate(self, record: Record) -> None:
        self.client.merge_patch(self.node_path, {'metadata': {'annotations': {ANNOTATION: record.value()}}})

    def unschedulable(self) -> bool:
        return bool((self.get_node().get('spec') or {}).get('unschedulable'))

    def drain(self) -> Dict[str, Any]:
        o = self.drain_options
        try:
            done = kube_drain.drain(self.client, self.node_name, timeout=o.timeout, eviction_timeout=o.eviction_timeout,
                                    protected_namespaces=o.protected_namespaces, force=o.force)
        except kube_drain.DrainError as exc:
            raise ProvisioningError('%s; the node stays cordoned, run again once the pods can go' % exc,
                                    self.node_name) from exc
        return {'evicted': done.evicted, 'skipped': done.skipped, 'cordoned': done.cordoned}

    def uncordon(self) -> None:
        kube_drain.uncordon(self.client, self.node_name)

    # --- the kubelet ---------------------------------------------------------------------------------
    def kubelet_binary_version(self) -> Optional[Version]:
        return binary_version(self.root, self.kubelet_binary, self.run)

    def can_install(self) -> bool:
        return bool(self.install_command)

    def install_kubelet(self, version: Version) -> None:
        values = {'version': str(version), 'semver': version.semver, 'root': self.root,
                  'binary': layout.host_path(self.root, self.kubelet_binary)}
        argv = [part.format(**values) for part in self.install_command]
        done = self.run(argv)
        if done.returncode != 0:
            raise ProvisioningError('the kubelet install command failed (rc=%d): %s: %s'
                                    % (done.returncode, ' '.join(argv), answer(done)), self.node_name)

    def restart_kubelet(self) -> None:
        """systemctl restart kubelet on a real root; on a lab root the stand-in reads the binary's version itself."""
        if not self.manage_kubelet or os.path.normpath(self.root) != '/':
            return
        done = systemctl(layout.KUBELET_SERVICE, 'restart', run=self.run)
        if done.returncode != 0:
            raise ProvisioningError('systemctl restart kubelet failed (rc=%d): %s' % (done.returncode, answer(done)),
                                    self.node_name)

    # --- kube-proxy ----------------------------------------------------------------------------------
    def _kube_proxy_path(self) -> str:
        return api_path('apps/v1', 'daemonsets', KUBE_SYSTEM, 'kube-proxy')

    def set_kube_proxy(self, version: Version) -> None:
        ds = self.client.get(self._kube_proxy_path())
        image = ds['spec']['template']['spec']['containers'][0]['image']
        self.client.json_patch(self._kube_proxy_path(), [
            {'op': 'test', 'path': '/spec/template/spec/containers/0/image', 'value': image},
            {'op': 'replace', 'path': '/spec/template/spec/containers/0/image', 'value': with_tag(image, version)}])

    def kube_proxy_rolled(self, version: Version) -> Tuple[bool, str]:
        ds = self.client.get(self._kube_proxy_path())
        status = ds.get('status') or {}
        desired = status.get('desiredNumberScheduled', 0)
        done = (status.get('observedGeneration', 0) >= (ds.get('metadata') or {}).get('generation', 0)
                and status.get('updatedNumberScheduled', 0) == desired and status.get('numberAvailable', 0) == desired)
        return done, 'updated %s of %s' % (status.get('updatedNumberScheduled', 0), desired)
