# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What `node_maintenance` changes on a node, as pure functions (`plan_node_change`): the merge patch of
`metadata.labels`/`metadata.annotations` that sets or removes the given keys (None removes), with
Kubernetes' key and value rules (common/names.py) checked first, the `state: requested|approved|released`
shortcuts, and `cloud.sap/maintenance-profile` editing that keeps the other profiles of an `A--B` label.
The controller owns `cloud.sap/maintenance-state` and `cloud.sap/maintenance-data`: they may be removed
(recovery), never set. Errors are OptionError naming the option and the item."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.common.names import is_dns_subdomain, is_label_name, is_label_value
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.constants import (
    DATA_ANNOTATION, IN_MAINTENANCE, PROFILE_LABEL, PROFILE_SEPARATOR, STATE_LABEL, split_profiles)
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.data import parse_data
from ansible_collections.steward.cluster.plugins.module_utils.maintenance.errors import DataError, OptionError

APPROVAL_ANNOTATION = {'cloud.sap/maintenance-approved': 'true'}
SHORTCUT_STATES = ('requested', 'approved', 'released')
PROFILE_MODES = ('add', 'replace', 'remove')


def check_key(key: Any, what: str) -> str:
    """Kubernetes' qualified names: `[prefix/]name`, prefix a DNS subdomain (<= 253), name <= 63."""
    if not isinstance(key, str) or not key:
        raise OptionError(what, 'qualified-name', 'keys must be non-empty strings, got %r' % (key,), key)
    prefix, slash, name = key.rpartition('/')
    if slash and not is_dns_subdomain(prefix):
        raise OptionError(what, 'qualified-name', '%r is not a valid key: the prefix %r must be a DNS subdomain (lower case, '
                          'digits, "-" and ".")' % (key, prefix), key)
    if not is_label_name(name):
        raise OptionError(what, 'qualified-name', '%r is not a valid key: the name part %r must be 1-63 characters of letters, '
                          'digits, "-", "_" and ".", starting and ending with a letter or digit' % (key, name), key)
    return key


def as_value(value: Any, where: str) -> Optional[str]:
    """Option values as Kubernetes strings: YAML booleans become `true`/`false`, numbers their text, None removes."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return 'true' if value else 'false'
    if isinstance(value, (int, float)):
        return str(value)
    raise OptionError(where, 'type', 'values must be strings (or null to remove), got %s' % type(value).__name__, value)


def check_label_value(value: Optional[str], where: str) -> Optional[str]:
    if value is None or is_label_value(value):
        return value
    raise OptionError(where, 'label-value', '%r is not a valid label value: at most 63 characters of letters, digits, "-", '
                      '"_" and ".", starting and ending with a letter or digit' % (value,), value)


# Kubernetes' limit on all of an object's annotations together (apimachinery TotalAnnotationSizeLimitB).
ANNOTATIONS_MAX_BYTES = 256 * 1024


def changes_from(option: str, mapping: Optional[Mapping[str, Any]], labels: bool = False) -> Dict[str, Optional[str]]:
    """A `{key: value-or-None}` option, checked: keys, label values, and annotations within the API's 256 KiB."""
    out: Dict[str, Optional[str]] = {}
    for key, value in (mapping or {}).items():
        check_key(key, option)
        text = as_value(value, '%s[%s]' % (option, key))
        out[key] = check_label_value(text, '%s[%s]' % (option, key)) if labels else text
    size = sum(len(k.encode('utf-8')) + len((v or '').encode('utf-8')) for k, v in out.items())
    if not labels and size > ANNOTATIONS_MAX_BYTES:
        raise OptionError(option, 'max-size', 'annotations total %d bytes; the API server accepts at most %d (256 KiB) '
                          'on an object' % (size, ANNOTATIONS_MAX_BYTES), None)
    return out


def shortcut_changes(state: Optional[str], request_annotation: Optional[Mapping[str, Any]] = None,
                     request_label: Optional[Mapping[str, Any]] = None,
                     approval_annotation: Optional[Mapping[str, Any]] = None) -> Tuple[Dict[str, Optional[str]], Dict[str, Optional[str]]]:
    """(annotations, labels) that `state` stands for: requested sets the request keys, approved the approval
    annotation, released removes both (the approval too, should no trigger have removed it yet)."""
    if state is None:
        return {}, {}
    if state not in SHORTCUT_STATES:
        raise OptionError('state', 'one-of', '%r is not one of %s' % (state, ', '.join(SHORTCUT_STATES)), state)
    request_a = changes_from('request_annotation', request_annotation)
    request_l = changes_from('request_label', request_label, labels=True)
    approval = changes_from('approval_annotation', APPROVAL_ANNOTATION if approval_annotation is None else approval_annotation)
    if state == 'requested':
        if not request_a and not request_l:
            raise OptionError('state=requested', 'required', 'give request_annotation (or request_label): the key your profile '
                              'checks, for the flatcar example {"flatcar-linux-update.v1.flatcar-linux.net/reboot-needed": "true"}')
        return request_a, request_l
    if state == 'approved':
        if not approval:
            raise OptionError('state=approved', 'required', 'approval_annotation is empty')
        return approval, {}
    if not request_a and not request_l:
        raise OptionError('state=released', 'required', 'give request_annotation (or request_label), the keys to remove')
    annotations = {key: None for key in request_a}
    annotations.update({key: None for key in approval})
    return annotations, {key: None for key in request_l}


def edit_profile_label(current: str, profiles: Sequence[str], mode: str = 'add') -> Optional[str]:
    """The new `cloud.sap/maintenance-profile` value (None: remove the label). `add` appends missing names
    and keeps the others in order, `replace` sets exactly these, `remove` drops them."""
    if mode not in PROFILE_MODES:
        raise OptionError('profile_mode', 'one-of', '%r is not one of %s' % (mode, ', '.join(PROFILE_MODES)), mode)
    wanted: List[str] = []
    for name in profiles:
        if not is_label_name(name) or PROFILE_SEPARATOR in name:
            raise OptionError('profile', 'profile-name', '%r is not a valid profile name (letters, digits, "_" and "."; "-" '
                              'but not "--", which separates profiles in the label)' % (name,), name)
        if name not in wanted:
            wanted.append(name)
    names = [n for n in (current or '').split(PROFILE_SEPARATOR) if n]
    if mode == 'add':
        result = names + [n for n in wanted if n not in names]
    elif mode == 'replace':
        result = wanted
    else:
        result = [n for n in names if n not in wanted]
    value = PROFILE_SEPARATOR.join(result)
    if len(value) > 63:
        raise OptionError('profile', 'label-value', 'the label value %r would be longer than 63 characters, the limit of a '
                          'label value' % value, value)
    return value or None


def check_controller_keys(annotations: Mapping[str, Optional[str]], labels: Mapping[str, Optional[str]]) -> None:
    """The state label and the data annotation belong to the controller: removing them (recovery) is allowed."""
    if labels.get(STATE_LABEL) is not None:
        raise OptionError('labels[%s]' % STATE_LABEL, 'controller-owned', 'the controller sets this label; remove it (null) '
                          'to have it recomputed, never set it', labels.get(STATE_LABEL))
    if annotations.get(DATA_ANNOTATION) is not None:
        raise OptionError('annotations[%s]' % DATA_ANNOTATION, 'controller-owned', 'the controller writes this annotation; '
                          'remove it (null) to reset every profile to operational, never set it')


@dataclasses.dataclass
class NodePlan:
    patch: Dict[str, Any]               # merge patch ({} when nothing changes); None values delete keys
    before: Dict[str, Dict[str, str]]   # {'labels': ..., 'annotations': ...}
    after: Dict[str, Dict[str, str]]
    changes: List[str]
    warnings: List[str]

    @property
    def changed(self) -> bool:
        return bool(self.patch)


def plan_node_change(node: Mapping[str, Any], annotations: Mapping[str, Optional[str]], labels: Mapping[str, Optional[str]],
                     profiles: Optional[Sequence[str]] = None, profile_mode: str = 'add') -> NodePlan:
    """The merge patch that makes the node's labels and annotations match (keys already checked)."""
    labels = dict(labels)
    if profiles:
        if PROFILE_LABEL in labels:
            raise OptionError('profile', 'exclusive', 'profile and labels[%s] both set the profile label: use one' % PROFILE_LABEL)
        current_label = ((node.get('metadata') or {}).get('labels') or {}).get(PROFILE_LABEL, '')
        labels[PROFILE_LABEL] = edit_profile_label(current_label, profiles, profile_mode)
    check_controller_keys(annotations, labels)
    md = node.get('metadata') or {}
    before = {'labels': dict(md.get('labels') or {}), 'annotations': dict(md.get('annotations') or {})}
    after = copy.deepcopy(before)
    patch: Dict[str, Any] = {}
    changes: List[str] = []
    for section, wanted, noun in (('labels', labels, 'label'), ('annotations', annotations, 'annotation')):
        for key, value in wanted.items():
            current = before[section].get(key)
            if value is None and key in before[section]:
                del after[section][key]
                changes.append('remove %s %s (was %r)' % (noun, key, current))
            elif value is not None and (key not in before[section] or current != value):
                after[section][key] = value
                changes.append('set %s %s=%r%s' % (noun, key, value, '' if key not in before[section] else ' (was %r)' % current))
            else:
                continue
            patch.setdefault('metadata', {}).setdefault(section, {})[key] = value
    warnings = profile_removal_warnings(node, before['labels'].get(PROFILE_LABEL, ''), after['labels'].get(PROFILE_LABEL, ''))
    return NodePlan(patch, before, after, changes, warnings)


def profile_removal_warnings(node: Mapping[str, Any], old_label: str, new_label: str) -> List[str]:
    """Detaching a profile that is in-maintenance drops its state: the node may leave maintenance at once."""
    if old_label == new_label:
        return []
    md = node.get('metadata') or {}
    try:
        data = parse_data((md.get('annotations') or {}).get(DATA_ANNOTATION), md.get('labels') or {})
    except DataError:
        return []
    kept = split_profiles(new_label)
    return ['profile %s is in-maintenance on node %s and is being detached: the controller forgets its state and the node '
            'may leave maintenance without its in-maintenance transition (and triggers)' % (name, md.get('name'))
            for name, entry in sorted(data.profiles.items()) if name not in kept and entry.current == IN_MAINTENANCE]
