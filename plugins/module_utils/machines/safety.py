# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Safety rules: when not to replace, not to scale up, not to delete a VM. Each rule is named, and a stop
says which rule and why (the `Frozen` condition's reason and message, an Event, a metric).

* **Meltdown limit** (MCM, per MachineDeployment): an Unknown machine may become Failed only while fewer
  than `max_replacements` machines of its deployment are "in progress" (neither Running nor Unknown;
  Terminating counts twice, as in MCM). MCM's limit is 1 and fixed; ours is a flag with the same default.
* **Fleet freeze** (ours): when more than `fleet_freeze_fraction` of all machines (and at least
  `fleet_freeze_min_machines`) are unreachable -- Node missing or Ready=Unknown -- while the cloud reports
  their VMs running, that is an outage between kubelets and the API server, not broken machines: nothing is
  replaced by health timeout until it ends, and every deployment with machines gets `Frozen=True`. When the
  freeze ends, machines still Unknown get a fresh health clock. A VM the cloud reports terminated or missing
  is positive evidence and is replaced regardless.
* **Missing-VM evidence** needs `missing_confirmations` consecutive listings without the VM; and if more
  than the fleet fraction of a class's machines go missing at once, the listing itself is suspect (wrong
  account or region, an API bug) and nothing is concluded (`CloudInventorySuspect`).
* **API-server freeze** (MCM): the shell probes the API server; after `timeout` of failures the machines of
  every namespace are frozen (only deletions proceed); on recovery Unknown machines get a fresh health clock.
* **Watchdog freeze** (ours): while any Deployment or StatefulSet in a namespace carries dependency-watchdog's
  `meltdown-protection-active` annotation, machines in that namespace are not replaced.
* **Overshoot freeze** (MCM, per MachineSet): machines (deleting ones included: replacements of machines stuck
  in their deletion pile up) >= replicas + maxSurge + safety-up freezes scale-up
  (label `freeze: "True"`, condition Frozen); it thaws at <= that limit - safety-down, or when an operator sets
  `safety.machine.sapcloud.io/unfreeze` on the deployment or set.
* **Orphan collection** on positive evidence only: a VM is deleted only if its owner tag names a Machine UID
  that does not exist, its class tag names the class listing it (so another controller's VMs are never ours),
  it is older than `orphan_min_age`, it was absent from the Machine store on two consecutive collection
  cycles, no freeze is active, the caches are synced, and the class still has machines (an empty store looks
  exactly like a wiped or unsynced one). MCM deletes any cluster-tagged VM without a matching machine name.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from ansible_collections.steward.cluster.plugins.module_utils.machines import health as health_mod
from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines.config import Settings
from ansible_collections.steward.cluster.plugins.module_utils.machines.constants import (
    ANNOTATION_UNFREEZE,
    FREEZE_API,
    FREEZE_FLEET,
    FREEZE_MISSING,
    FREEZE_OVERSHOOT,
    FREEZE_WATCHDOG,
    LABEL_FREEZE,
    Phase,
)
from ansible_collections.steward.cluster.plugins.module_utils.machines.driver import VM, VMState
from ansible_collections.steward.cluster.plugins.module_utils.machines.inventory import Inventory

Obj = Mapping[str, Any]


@dataclasses.dataclass(frozen=True)
class Freeze:
    rule: str             # one of constants.FREEZE_*
    message: str

    def text(self) -> str:
        return '%s: %s' % (self.rule, self.message)


# --- meltdown limit -------------------------------------------------------------------------------

def in_progress(machines: Iterable[Obj]) -> int:
    """MCM's canMarkMachineFailed count: machines neither Running nor Unknown; Terminating counts twice."""
    count = 0
    for m in machines:
        phase = o.phase(m)
        if o.deleting(m) and phase != Phase.TERMINATING:
            phase = Phase.TERMINATING
        if phase in (Phase.RUNNING, Phase.UNKNOWN):
            continue
        count += 2 if phase == Phase.TERMINATING else 1
    return count


# --- fleet freeze ---------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class FleetView:
    total: int
    unreachable: int
    freeze: Optional[Freeze]


def fleet(machines: Sequence[Obj], nodes: Mapping[str, Obj], vm_of: Mapping[str, Optional[VM]],
          settings: Settings) -> FleetView:
    """`vm_of`: machine uid -> its VM in the latest listing (None: not listed or unknown)."""
    total = unreachable = 0
    for m in machines:
        if o.deleting(m) or not o.provider_id(m) or o.phase(m) in (Phase.CREATING, Phase.CRASH_LOOP_BACK_OFF, Phase.PENDING,
                                                                   Phase.FAILED, Phase.TERMINATING):
            continue
        total += 1
        vm = vm_of.get(o.uid(m))
        if vm is None or vm.state != VMState.RUNNING:
            continue
        verdict = health_mod.judge(o.node_of(m, nodes.get), ())
        if not verdict.reachable:
            unreachable += 1
    threshold = settings.fleet_freeze_fraction * total
    if total and unreachable > threshold and unreachable >= settings.fleet_freeze_min_machines:
        return FleetView(total, unreachable, Freeze(FREEZE_FLEET, '%d of %d machines (%.0f%%, more than %.0f%%) are '
                                                    'unreachable while the cloud reports their VMs running: an outage, '
                                                    'not broken machines; nothing is replaced until it ends' % (
                                                        unreachable, total, 100.0 * unreachable / total,
                                                        100 * settings.fleet_freeze_fraction)))
    return FleetView(total, unreachable, None)


# --- missing VMs ------------------------------------------------------------------------------------

@dataclasses.dataclass
class MissingMemory:
    """Per machine uid: (listing seq last counted, consecutive listings without its VM), and since when the machine
    is known to have a VM (the first pass that saw its providerID).

    Only a listing that *started* after that moment is evidence: one started earlier (a slow listing, or the
    orphan collector's own, finishing just after a create) cannot contain the VM, and counting it replaced
    freshly created machines in a 200-machine scale-out."""
    counts: Dict[str, Tuple[int, int]] = dataclasses.field(default_factory=dict)
    known_since: Dict[str, float] = dataclasses.field(default_factory=dict)

    def observe(self, uid: str, seq: int, missing: bool, listed_at: float, now: float) -> int:
        since = self.known_since.setdefault(uid, now)
        if not missing:
            self.counts.pop(uid, None)
            return 0
        last_seq, count = self.counts.get(uid, (0, 0))
        if listed_at < since:
            return count              # the listing may predate the VM: no evidence either way
        if seq != last_seq:
            count += 1
        self.counts[uid] = (seq, count)
        return count

    def forget(self, live: Set[str]) -> None:
        for uid in [u for u in self.counts if u not in live]:
            del self.counts[uid]
        for uid in [u for u in self.known_since if u not in live]:
            del self.known_since[uid]


def missing_suspect(missing: int, total: int, settings: Settings) -> Optional[Freeze]:
    """Too many machines of one class missing at once: the listing, not the fleet, is wrong."""
    if total and missing >= settings.fleet_freeze_min_machines and missing > settings.fleet_freeze_fraction * total:
        return Freeze(FREEZE_MISSING, '%d of %d VMs of the class are missing from the cloud listing at once; the listing '
                      'is not trusted (wrong credentials, account or region?) and no machine is replaced for it' % (missing, total))
    return None


# --- API server ------------------------------------------------------------------------------------

class ApiFreeze:
    """The API-server freeze state (MCM's safety controller): frozen after `timeout` seconds of failed probes."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.failing_since: Optional[float] = None
        self.frozen = False
        self.last_error = ''

    def observe(self, ok: bool, now: float, error: str = '') -> Optional[bool]:
        """Record one probe; returns True when this froze, False when this thawed, None when nothing changed."""
        if ok:
            self.failing_since = None
            self.last_error = ''
            if self.frozen:
                self.frozen = False
                return False
            return None
        self.last_error = error
        if self.failing_since is None:
            self.failing_since = now
        if not self.frozen and now - self.failing_since >= self.timeout:
            self.frozen = True
            return True
        return None

    def freeze(self) -> Optional[Freeze]:
        if not self.frozen:
            return None
        return Freeze(FREEZE_API, 'the API server has not answered the safety probe for more than %ss (%s); only '
                      'deletions proceed' % (int(self.timeout), self.last_error or 'no answer'))


# --- watchdog ---------------------------------------------------------------------------------------

def watchdog_freezes(marked: Mapping[str, Sequence[str]]) -> Dict[str, Freeze]:
    """`marked`: namespace -> objects carrying the meltdown-protection annotation (`Deployment/name`)."""
    return {ns: Freeze(FREEZE_WATCHDOG, 'dependency-watchdog scaled down %s in namespace %s (annotation '
                       'dependency-watchdog.gardener.cloud/meltdown-protection-active): machines are not replaced while '
                       'it is active' % (', '.join(sorted(objs)[:5]) + (' and %d more' % (len(objs) - 5) if len(objs) > 5 else ''), ns))
            for ns, objs in marked.items() if objs}


# --- overshoot --------------------------------------------------------------------------------------

def overshoot(ms: Obj, machines: Sequence[Obj], md: Optional[Obj], surge: int, settings: Settings) -> Optional[bool]:
    """True: freeze the set; False: thaw it; None: leave as is (MCM's checkAndFreezeORUnfreezeMachineSets)."""
    labels = ((o.spec(ms).get('template') or {}).get('metadata') or {}).get('labels') or {}
    count = sum(1 for m in machines if all(o.labels(m).get(k) == v for k, v in labels.items()))
    if md is not None:
        higher = o.replicas(md) + surge + settings.safety_up
    else:
        higher = 2 * o.replicas(ms) + settings.safety_up
    lower = higher - settings.safety_down
    frozen = o.labels(ms).get(LABEL_FREEZE) == 'True'
    if ANNOTATION_UNFREEZE in o.annotations_of(ms) or (md is not None and ANNOTATION_UNFREEZE in o.annotations_of(md)):
        return False if frozen else None
    if not frozen and count >= higher:
        return True
    if frozen and count <= lower:
        return False
    return None


def overshoot_message(ms: Obj, count: int, limit: int) -> Freeze:
    return Freeze(FREEZE_OVERSHOOT, 'The number of machines backing MachineSet: %s is %d >= %d which is the '
                  'Max-ScaleUp-Limit' % (o.name(ms), count, limit))


# --- orphans ----------------------------------------------------------------------------------------

@dataclasses.dataclass
class OrphanMemory:
    """provider id -> collection cycles in a row in which its owner UID matched no Machine."""
    seen: Dict[str, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class OrphanVerdict:
    delete: Tuple[VM, ...]
    kept: Tuple[Tuple[str, str], ...]      # (provider id, why kept)
    skipped: str = ''                     # the whole class was skipped, and why


def orphans(inventory: Inventory, class_uid: str, machine_uids: Set[str], class_machines: int,
            memory: OrphanMemory, settings: Settings, now: float, freeze: Optional[Freeze], synced: bool) -> OrphanVerdict:
    if not synced:
        return OrphanVerdict((), (), 'caches not synced yet')
    if freeze is not None:
        return OrphanVerdict((), (), 'frozen (%s)' % freeze.rule)
    if not inventory.ok:
        return OrphanVerdict((), (), 'cloud listing failed')
    if class_machines == 0:
        return OrphanVerdict((), (), 'the class has no machines in the store (an empty store is not evidence)')
    delete: List[VM] = []
    kept: List[Tuple[str, str]] = []
    current: Dict[str, int] = {}
    for vm in inventory.vms:
        if vm.state.gone:
            continue
        if not vm.owner_uid:
            kept.append((vm.provider_id, 'no owner tag'))
            continue
        if vm.owner_uid in machine_uids:
            continue
        if vm.class_uid != class_uid:
            kept.append((vm.provider_id, 'class tag %r is not this class (%s): not ours' % (vm.class_uid, class_uid)))
            continue
        cycles = memory.seen.get(vm.provider_id, 0) + 1
        current[vm.provider_id] = cycles
        if vm.launched is None:
            kept.append((vm.provider_id, 'launch time unknown'))
            continue
        if now - vm.launched < settings.orphan_min_age:
            kept.append((vm.provider_id, 'younger than %ds' % settings.orphan_min_age))
            continue
        if cycles < 2:
            kept.append((vm.provider_id, 'owner absent on %d cycle(s), 2 needed' % cycles))
            continue
        delete.append(vm)
    memory.seen = current
    return OrphanVerdict(tuple(delete), tuple(kept))
