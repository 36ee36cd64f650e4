# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What is installed, from plain data the module (or a test) read: static-pod manifests, mirror pods, Nodes, the
kube-proxy DaemonSet and `kubelet --version`.

Where each version comes from:
* kube-apiserver, kube-controller-manager, kube-scheduler, etcd: the image tag of the node's static-pod manifest in
  /etc/kubernetes/manifests (the node's own files, for the node the module runs on) or else of its mirror pod
  `<component>-<node>` in kube-system (what the kubelet reports; kubeadm's `upgrade plan` reads the same pods);
* kubelet: the Node's `status.nodeInfo.kubeletVersion` (the running kubelet), or else what the host's kubelet
  install names: `kubelet --version` of the binary (`/usr/bin/kubelet`, option `kubelet_binary`) prints
  `Kubernetes v1.31.4`;
* kube-proxy: the image tag of the DaemonSet kube-system/kube-proxy, when there is one.
"""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Sequence

from ansible_collections.steward.cluster.plugins.module_utils.provisioning.render import from_yaml
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.plan import (
    Installed, NodeInstalled, etcd_version_of,
)
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.versions import (
    Version, image_version, kubelet_version,
)

COMPONENTS = ('kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'etcd')


def manifest_image(manifest: Optional[bytes], where: str = 'manifest') -> Optional[str]:
    """The first container's image of a static-pod manifest; None when there is none or it cannot be read."""
    if not manifest:
        return None
    try:
        return str(from_yaml(manifest, where)['spec']['containers'][0]['image'])
    except Exception:  # an unreadable manifest has no version: the plan refuses with unknown-version
        return None


def pod_image(pod: Mapping[str, Any]) -> Optional[str]:
    containers = (pod.get('spec') or {}).get('containers') or [{}]
    return containers[0].get('image')


def pod_ready(pod: Mapping[str, Any]) -> bool:
    return any(c.get('type') == 'Ready' and c.get('status') == 'True'
               for c in (pod.get('status') or {}).get('conditions') or [])


def mirror_images(pods: Sequence[Mapping[str, Any]]) -> Dict[str, Dict[str, str]]:
    """{node: {component: image}} from kube-system pods labelled `component` with a `spec.nodeName`."""
    out: Dict[str, Dict[str, str]] = {}
    for pod in pods:
        component = ((pod.get('metadata') or {}).get('labels') or {}).get('component')
        node = (pod.get('spec') or {}).get('nodeName')
        image = pod_image(pod)
        if component in COMPONENTS and node and image:
            out.setdefault(node, {})[component] = image
    return out


def node_kubelet_version(node: Optional[Mapping[str, Any]]) -> Optional[Version]:
    info = ((node or {}).get('status') or {}).get('nodeInfo') or {}
    return kubelet_version(info.get('kubeletVersion'))


def node_ready(node: Optional[Mapping[str, Any]]) -> bool:
    return any(c.get('type') == 'Ready' and c.get('status') == 'True'
               for c in ((node or {}).get('status') or {}).get('conditions') or [])


def installed_from(control_plane: Sequence[str], workers: Sequence[str], *, nodes: Mapping[str, Mapping[str, Any]],
                   mirror_pods: Sequence[Mapping[str, Any]], local_node: Optional[str] = None,
                   local_images: Optional[Mapping[str, Optional[str]]] = None,
                   local_kubelet: Optional[Version] = None,
                   kube_proxy: Optional[Mapping[str, Any]] = None) -> Installed:
    """The Installed view: `nodes` are the Node objects by name, `local_images` {component: image} from the
    manifests of `local_node` (the node the module runs on; they win over its mirror pods, which lag behind)."""
    images = mirror_images(mirror_pods)
    if local_node is not None and local_images is not None:
        images[local_node] = dict(images.get(local_node, {}), **{k: v for k, v in local_images.items() if v})
    out = []
    for name in list(control_plane) + [w for w in workers if w not in control_plane]:
        mine = images.get(name, {})
        kubelet = node_kubelet_version(nodes.get(name))
        if kubelet is None and name == local_node:
            kubelet = local_kubelet
        cp = name in control_plane
        out.append(NodeInstalled(
            name=name, control_plane=cp, kubelet=kubelet,
            apiserver=image_version(mine.get('kube-apiserver')) if cp else None,
            controller_manager=image_version(mine.get('kube-controller-manager')) if cp else None,
            scheduler=image_version(mine.get('kube-scheduler')) if cp else None,
            etcd=etcd_version_of(mine['etcd'].rsplit(':', 1)[-1]) if cp and ':' in mine.get('etcd', '') else None,
            etcd_image=mine.get('etcd') if cp else None))
    proxy = None
    if kube_proxy:
        containers = ((((kube_proxy.get('spec') or {}).get('template') or {}).get('spec') or {}).get('containers')
                      or [{}])
        proxy = image_version(containers[0].get('image'))
    return Installed(tuple(out), proxy)
