"""The fleet-freeze contract between the prober and the machine controller (issue 15 §2, docs/watchdog.md
"The machine controller's fleet freeze"): every target the prober holds down carries
`dependency-watchdog.gardener.cloud/meltdown-protection-active`, and loses it when it is restored or released.
The machines loop freezes replacements in a namespace while any Deployment or StatefulSet there carries that
annotation (controller/steward_controller/machines/inputs.py `check_watchdog`, then
module_utils/machines/safety.py `watchdog_freezes`). Here the prober's own plan steps are applied to objects, as
the scaler writes them (merge patches: None removes), and the machines engine judges the result."""

from typing import Any, Dict, List, Mapping, Optional

from ansible_collections.steward.cluster.plugins.module_utils.machines import constants as machines
from ansible_collections.steward.cluster.plugins.module_utils.machines.safety import watchdog_freezes
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import constants as c
from ansible_collections.steward.cluster.plugins.module_utils.watchdog import plan as p
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.decision import SCALE_DOWN, SCALE_UP
from ansible_collections.steward.cluster.plugins.module_utils.watchdog.prober_config import parse_prober_config

NS = 'shoot--dev'
OWNER = 'steward-watchdog-prober'
CONFIG = parse_prober_config('''
dependentResourceInfos:
  - ref: {apiVersion: apps/v1, kind: Deployment, name: kube-controller-manager}
    scaleUp: {level: 1}
    scaleDown: {level: 0}
  - ref: {apiVersion: apps/v1, kind: StatefulSet, name: machine-controller-manager}
    scaleUp: {level: 1}
    scaleDown: {level: 1}
''')
KCM, MCM = CONFIG.dependent_resources


class Target:
    """A scalable object as the API server keeps it: replicas and annotations."""

    def __init__(self, resource: p.DependentResource, replicas: int):
        self.resource = resource
        self.replicas = replicas
        self.annotations: Dict[str, str] = {}

    def observe(self) -> p.Observation:
        return p.Observation(exists=True, replicas=self.replicas, annotations=dict(self.annotations),
                             resource_version='1', status_replicas=self.replicas, ready_replicas=self.replicas)

    def patch(self, annotations: Mapping[str, Optional[str]]) -> None:
        for key, value in annotations.items():
            if value is None:
                self.annotations.pop(key, None)
            else:
                self.annotations[key] = value

    def apply(self, step: p.Step) -> None:
        self.patch(step.annotations)
        if step.action == p.SCALE:
            self.replicas = step.replicas_after
        self.patch(step.after)


def machines_view(targets: List[Target]) -> Dict[str, Any]:
    """What the machines loop concludes from these objects (its `check_watchdog` criterion, then its engine)."""
    marked: Dict[str, List[str]] = {}
    for target in targets:
        if machines.ANNOTATION_WATCHDOG_MELTDOWN in target.annotations:
            marked.setdefault(NS, []).append(str(target.resource.ref))
    return watchdog_freezes(marked)


def run(direction: str, targets: List[Target]) -> None:
    """One probe's operation as the scaler does it: the plan's intent writes, then each step decided again on a
    fresh observation and applied."""
    by_ref = {t.resource.ref: t for t in targets}
    plan = p.build_plan(direction, [t.resource for t in targets], {ref: t.observe() for ref, t in by_ref.items()},
                        OWNER, 'test')
    for step in plan.prepare:
        by_ref[step.ref].patch(step.annotations)
    for step in plan.steps:
        target = by_ref[step.ref]
        target.apply(p.step_for(direction, target.resource, target.observe(), OWNER))


def test_both_sides_name_the_same_annotation():
    assert c.MELTDOWN_ANNOTATION == machines.ANNOTATION_WATCHDOG_MELTDOWN == \
        'dependency-watchdog.gardener.cloud/meltdown-protection-active'


def test_every_target_held_down_freezes_the_fleet_until_restored():
    kcm, mcm = Target(KCM, 3), Target(MCM, 2)
    assert machines_view([kcm, mcm]) == {}

    run(SCALE_DOWN, [kcm, mcm])
    assert (kcm.replicas, mcm.replicas) == (0, 0)
    assert all(t.annotations[c.MELTDOWN_ANNOTATION] == '' for t in (kcm, mcm))
    freeze = machines_view([kcm, mcm])[NS]
    assert freeze.rule == machines.FREEZE_WATCHDOG
    assert 'Deployment/kube-controller-manager' in freeze.message and 'StatefulSet/machine-controller-manager' in freeze.message

    run(SCALE_DOWN, [kcm, mcm])                     # every further failed probe re-applies: the marker stays
    assert NS in machines_view([kcm, mcm])

    run(SCALE_UP, [kcm, mcm])
    assert (kcm.replicas, mcm.replicas) == (3, 2)
    assert machines_view([kcm, mcm]) == {} and kcm.annotations == {} and mcm.annotations == {}


def test_a_released_target_stops_freezing_but_the_others_still_do():
    """Someone scaled KCM back by hand during the outage: the prober releases it (marker removed); the machine
    controller stays frozen while MCM is still held down, and is free once MCM is restored."""
    kcm, mcm = Target(KCM, 3), Target(MCM, 2)
    run(SCALE_DOWN, [kcm, mcm])
    kcm.replicas = 2
    run(SCALE_DOWN, [kcm, mcm])
    assert kcm.annotations[c.STATE_ANNOTATION] == c.RELEASED and c.MELTDOWN_ANNOTATION not in kcm.annotations
    assert machines_view([kcm, mcm])[NS].message.count('Deployment/kube-controller-manager') == 0
    run(SCALE_UP, [kcm, mcm])
    assert machines_view([kcm, mcm]) == {} and (kcm.replicas, mcm.replicas) == (2, 2)


def test_ignore_scaling_targets_never_carry_the_marker():
    kcm = Target(KCM, 3)
    kcm.annotations[c.IGNORE_SCALING_ANNOTATION] = 'true'
    run(SCALE_DOWN, [kcm])
    assert kcm.replicas == 3 and machines_view([kcm]) == {}
