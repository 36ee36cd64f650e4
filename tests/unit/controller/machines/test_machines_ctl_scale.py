"""The machines loop at scale, without a cluster.

Cloud admission (controller/steward_controller/machines/admission.py): a pass hands workers no more cloud-bound
machine jobs of an AWS class than its EC2 budget serves in about a second; the rest wait in the scheduler and go
out as jobs finish. Without it a scale-out of 100 machines at 3.2 requests/s put 50 creates to sleep in the token
bucket and two of them failed as Throttled after 30 s (test_machines_crash_budget.py). The workers' connection
pool is as large as they are many. Passes that take long are spaced so that planning takes a fifth of the time."""

from __future__ import annotations

import argparse
import threading
import time
import types

import kubernetes

from ansible_collections.steward.cluster.plugins.module_utils.kube.client import KubeClient
from ansible_collections.steward.cluster.plugins.module_utils.machines import objects as o
from ansible_collections.steward.cluster.plugins.module_utils.machines.reconcile import ClassState

from steward_controller.core.metrics import Health, Metrics
from steward_controller.machines import add_arguments, options
from steward_controller.machines.admission import CloudSlots, slots_for
from steward_controller.machines.controller import MachinesController
from steward_controller.machines.scheduler import MIN_PASS_GAP, pass_gap
from support.machines_sim import MachinesSim


def test_slots_are_the_burst_plus_one_second_of_rate():
    assert slots_for(10.0, 20) == 30 and slots_for(3.2, 3) == 7 and slots_for(0.1, 1) == 2


def test_slots_are_taken_once_per_job_and_given_back():
    slots = CloudSlots()
    assert slots.take('ns/a', 'u1', 2) and not slots.take('ns/a', 'u1', 2) and slots.take('ns/a', 'u2', 2)
    assert not slots.take('ns/a', 'u3', 2) and slots.take('ns/b', 'u3', 2) and slots.take('ns/a', 'u3', None)
    slots.release('ns/a', 'u1')
    slots.release('ns/a', 'u1')
    assert slots.in_use('ns/a') == 2 and slots.take('ns/a', 'u4', 3)


class Pool:
    """Keeps the jobs a pass submits instead of running them."""

    def __init__(self):
        self.jobs = []

    def submit(self, fn):
        self.jobs.append(fn)


def controller_over(world, rate='3.2', burst='3'):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    opts = options(parser.parse_args(['--aws-api-rate', rate, '--aws-api-burst', burst]))
    configuration = kubernetes.client.Configuration()
    configuration.host = 'http://127.0.0.1:1'
    settings = types.SimpleNamespace(options=lambda name: opts, watch_namespaces=[], secret_opt_in=True)
    runtime = types.SimpleNamespace(client=KubeClient(configuration), settings=settings,
                                    metrics=Metrics(), health=Health(), clock=lambda: world_now[0])
    controller = MachinesController(runtime, opts)
    controller.pool.shutdown(wait=False)
    controller.pool = Pool()
    controller.world = lambda: world
    return controller


world_now = [0.0]


def fresh_machines(provider, count=100):
    """A deployment of `count` whose machines exist and wait for their CreateMachine, under a class of `provider`."""
    sim = MachinesSim()
    sim.add_class()
    sim.add_deployment(replicas=count)
    sim.step(count=2)
    world = sim.world()
    assert len(world.machines) == count and not any(o.provider_id(m) for m in world.machines)
    world.classes = {key: ClassState(dict(state.obj, provider=provider), '', state.inventory)
                     for key, state in world.classes.items()}
    world_now[0] = sim.now
    return world


def machine_jobs(controller, world):
    uids = {o.uid(m) for m in world.machines}
    return sorted(uids & controller.busy)


def test_a_pass_sends_an_aws_class_no_more_creates_than_its_slots_and_the_rest_as_jobs_finish():
    world = fresh_machines('AWS')
    controller = controller_over(world)
    controller.run_pass()
    first = machine_jobs(controller, world)
    assert len(first) == slots_for(3.2, 3) == controller.cloud_slots.in_use('ns/cls')
    controller.run_pass()
    assert machine_jobs(controller, world) == first            # nothing finished: nothing more goes out
    finished = []
    controller._run_machine = lambda machine, plan: finished.append(o.uid(machine))   # two creates finish
    for job in list(controller.pool.jobs):
        if len(finished) < 2 and any(getattr(c.cell_contents, '__name__', '') == '_machine_job'
                                     for c in job.__closure__ or () if callable(c.cell_contents)):
            job()
    assert len(finished) == 2 and controller.cloud_slots.in_use('ns/cls') == slots_for(3.2, 3) - 2
    world.machines = [m for m in world.machines if o.uid(m) not in finished]     # their VMs exist now
    controller.run_pass()
    second = machine_jobs(controller, world)
    assert len(second) == slots_for(3.2, 3) and len(set(second) - set(first)) == 2


def test_the_workers_share_a_connection_pool_as_large_as_they_are_many():
    controller = controller_over(fresh_machines('AWS', count=1))
    assert controller.client.api.rest_client.pool_manager.connection_pool_kw['maxsize'] >= controller.settings.concurrent_syncs
    assert controller.target.client is controller.client


def test_other_providers_are_not_limited():
    world = fresh_machines('Sabakan')
    controller = controller_over(world)
    controller.run_pass()
    assert len(machine_jobs(controller, world)) == 100


def test_long_passes_are_spaced_so_that_planning_takes_a_fifth_of_the_time():
    assert pass_gap(0.01) == MIN_PASS_GAP and abs(pass_gap(0.126) - 0.504) < 1e-9 and abs(pass_gap(1.0) - 4.0) < 1e-9


def test_the_scheduler_waits_out_the_gap_however_often_it_is_woken():
    """A pass of 0.2 s woken all the time: the next starts no sooner than 0.8 s after it ends (was 0.2 s)."""
    world = fresh_machines('AWS', count=1)
    controller = controller_over(world)
    controller.synced = True
    controller.refresh_listings = lambda: None
    starts = []

    def slow_pass():
        starts.append(time.monotonic())
        time.sleep(0.2)
        controller.wake.set()           # a job finished meanwhile
        return time.monotonic()          # and another pass is due at once
    controller.run_pass = slow_pass
    thread = threading.Thread(target=controller._run, daemon=True)
    thread.start()
    try:
        time.sleep(3.2)
    finally:
        controller.stopping.set()
        controller.wake.set()
        thread.join(10)
    assert len(starts) >= 2
    assert min(b - a for a, b in zip(starts, starts[1:])) >= 0.2 + 0.8 * 0.95, starts
