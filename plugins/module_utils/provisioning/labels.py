# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node labels this collection owns, and only those.

Promenade's node-labels API replaces every label but `kubernetes.io` ones, so a second tool's labels vanish
(its users' usual complaint). Here the keys we set are recorded in the annotation
`cluster.steward.io/owned-labels`; a desired set adds or changes those keys and removes owned keys it no longer
lists. A label anyone else set is never changed or removed: asking for another value of such a key is refused
(`foreign-label`), and the same value is left as it is, still theirs.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.provisioning.errors import Refused

OWNED_ANNOTATION = 'cluster.steward.io/owned-labels'


@dataclasses.dataclass
class LabelPlan:
    set: Dict[str, str]             # key -> new value (added or changed)
    remove: List[str]               # owned keys no longer desired
    owned: List[str]                # owned keys after the change
    foreign_kept: List[str]         # desired keys already set to that value by someone else (left theirs)
    before: Dict[str, str]
    after: Dict[str, str]

    @property
    def changed(self) -> bool:
        return bool(self.set or self.remove) or self.owned != self.owned_before

    owned_before: List[str] = dataclasses.field(default_factory=list)

    def patch(self, resource_version: Optional[str] = None) -> Dict[str, Any]:
        """A merge patch for the Node (with the resourceVersion precondition when given)."""
        labels: Dict[str, Optional[str]] = dict(self.set)
        labels.update({k: None for k in self.remove})
        metadata: Dict[str, Any] = {'labels': labels,
                                    'annotations': {OWNED_ANNOTATION: ','.join(self.owned) if self.owned else None}}
        if resource_version:
            metadata['resourceVersion'] = resource_version
        return {'metadata': metadata}

    def lines(self) -> List[str]:
        return (['set %s=%s' % (k, v) for k, v in sorted(self.set.items())] + ['remove %s' % k for k in self.remove])


def owned_keys(annotations: Optional[Mapping[str, str]]) -> List[str]:
    raw = (annotations or {}).get(OWNED_ANNOTATION) or ''
    return sorted({k.strip() for k in raw.split(',') if k.strip()})


def plan_labels(node: Mapping[str, Any], desired: Mapping[str, str]) -> LabelPlan:
    """The change that makes the owned labels of `node` (a Node object) equal `desired`."""
    metadata = node.get('metadata') or {}
    current: Dict[str, str] = dict(metadata.get('labels') or {})
    owned = owned_keys(metadata.get('annotations'))
    conflicts: List[Tuple[str, str, str]] = []
    to_set: Dict[str, str] = {}
    foreign_kept: List[str] = []
    for key, value in sorted(desired.items()):
        if key in owned or key not in current:
            if current.get(key) != value:
                to_set[key] = value
        elif current[key] == value:
            foreign_kept.append(key)
        else:
            conflicts.append((key, current[key], value))
    if conflicts:
        raise Refused('labels set by someone else are never changed: %s; remove them by hand (or with the tool that '
                      'set them) first if this collection should own them' % '; '.join(
                          '%s is %r, not %r' % c for c in conflicts), 'foreign-label',
                      (metadata.get('name') or 'node'))
    remove = sorted(k for k in owned if k not in desired and k in current)
    new_owned = sorted(k for k in desired if k not in foreign_kept)
    after = dict(current)
    after.update(to_set)
    for key in remove:
        after.pop(key, None)
    return LabelPlan(set=to_set, remove=remove, owned=new_owned, foreign_kept=foreign_kept, before=current,
                     after=after, owned_before=owned)
