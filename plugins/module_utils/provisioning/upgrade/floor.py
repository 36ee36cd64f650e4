# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What is installed is the floor: node_join and cluster_genesis run after an upgrade with the inventory unchanged
(its `kubernetes_version` and `etcd_image` still the old ones) must not roll a node back.

For each static pod of the control plane and etcd, when the manifest on the node names a newer release than the one
rendered, the rendered manifest keeps the node's image (everything else as rendered). Only `allow_downgrade` (the
option of those modules) renders the older one. Compared per component, so a node in the middle of an upgrade (its
apiserver moved, its controller-manager not yet) keeps each where it is.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.provisioning import layout
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.render import from_yaml, to_yaml
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.installed import manifest_image
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.plan import etcd_version_of
from ansible_collections.steward.cluster.plugins.module_utils.provisioning.upgrade.versions import image_version

FLOORED = ('kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'etcd')


def _release(component: str, image: Optional[str]) -> Optional[Tuple[int, ...]]:
    if not image or ':' not in image.rsplit('/', 1)[-1]:
        return None
    if component == 'etcd':
        return etcd_version_of(image.split('@', 1)[0].rsplit(':', 1)[1])
    version = image_version(image)
    return (version.major, version.minor, version.patch, version.release) if version else None


def keep_installed(planned: Mapping[str, Any], read: Callable[[str], Optional[bytes]],
                   allow_downgrade: bool = False) -> Tuple[Dict[str, Any], List[str]]:
    """`planned` ({node path: FileSpec}) with every floored manifest holding the installed image when that is newer;
    the warnings say which were kept (and, with `allow_downgrade`, which go back)."""
    out = dict(planned)
    warnings: List[str] = []
    for component in FLOORED:
        path = layout.MANIFEST[component]
        spec = planned.get(path)
        installed = manifest_image(read(path), path)
        if spec is None or installed is None:
            continue
        wanted = manifest_image(spec.content, path)
        have, want = _release(component, installed), _release(component, wanted)
        if have is None or want is None or have <= want:
            continue
        if allow_downgrade:
            warnings.append('%s goes back from %s to %s (allow_downgrade)' % (component, installed, wanted))
            continue
        doc = from_yaml(spec.content, path)
        doc['spec']['containers'][0]['image'] = installed
        out[path] = dataclasses.replace(spec, content=to_yaml(doc))
        warnings.append('%s stays at %s: the node runs a newer release than %s asks for (an upgrade); set '
                        'allow_downgrade to go back' % (component, installed, wanted))
    return out, warnings
