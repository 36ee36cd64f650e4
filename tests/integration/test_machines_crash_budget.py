"""machines.md §(f)1 and §(f)5 against EC2 with fidelity (ClientToken idempotency, describe lag, a request limit):
a controller killed between RunInstances and the status write, ten times, still leaves exactly one instance per
machine; a scale-out under an EC2 request limit is never throttled and lists instances once per wave."""

import time


from support.machines_cluster import MachinesBench, wait_for


def tagged(bench, key):
    return {t['Value'] for i in bench.all_instances() for t in i['Tags'] if t['Key'] == key}


def test_sigkill_between_run_instances_and_the_status_write_never_makes_a_second_instance(kube, ec2, tmp_path):
    ec2.set_describe_lag(60)     # the listings never see the new instances: only the ClientToken can prevent duplicates
    bench = MachinesBench(kube, ec2.url, str(tmp_path))
    try:
        bench.create_class()
        bench.create_deployment(replicas=4)
        for attempt in range(10):
            before = ec2.calls('RunInstances')
            proc = bench.controller(env={'STEWARD_MACHINES_CRASH_AFTER_CREATE': '1'})
            wait_for(lambda: proc.proc.poll() is not None, 120, 0.5, what='crash %d after RunInstances' % (attempt + 1))
            # killed by itself at the crash point (RunInstances answered, the status not written), every time
            assert proc.proc.returncode == -9, proc.log()[-2000:]
            assert proc.log().count('test crash point: SIGKILL after CreateMachine (aws:///') == attempt + 1
            assert ec2.calls('RunInstances') > before
        runs = ec2.calls('RunInstances')
        assert runs >= 10
        machines = bench.machines()
        assert len(machines) == 4 and all(not m['spec'].get('providerID') for m in machines)   # no status ever written
        assert len(bench.all_instances()) <= 4
        ec2.set_describe_lag(0)
        bench.controller()
        machines = bench.wait_running(4, timeout=180)
        instances = bench.all_instances()
        assert len(instances) == 4, [i['InstanceId'] for i in instances]
        assert tagged(bench, 'machine.steward.io/owner-uid') == {m['metadata']['uid'] for m in machines}
        assert {m['spec']['providerID'].rsplit('/', 1)[1] for m in machines} == {i['InstanceId'] for i in instances}
    finally:
        bench.stop()


def test_a_scale_out_under_an_ec2_request_limit_is_never_throttled_and_lists_once_per_wave(kube, ec2, tmp_path):
    ec2.set_rate_limit(4, burst=4)
    bench = MachinesBench(kube, ec2.url, str(tmp_path), kubelets=False)
    try:
        bench.create_class()
        bench.create_deployment(replicas=60)
        ec2.reset_counts()
        started = time.monotonic()
        proc = bench.controller('--aws-api-rate', '3', '--aws-api-burst', '3', '--machine-cloud-sync-period', '60s',
                                '--machine-safety-orphan-vms-period', '15m')
        wait_for(lambda: len(bench.running_instances()) == 60 and all(m['spec'].get('providerID') for m in bench.machines()),
                 300, 2.0, what='60 instances')
        elapsed = time.monotonic() - started
        assert ec2.throttled() == 0
        describes = ec2.calls('DescribeInstances')
        assert describes <= 60 / 50 + 1, describes        # one listing per wave, not one per machine
        assert ec2.calls('RunInstances') == 60 and len(bench.machines()) == 60
        assert proc.metric('mcm_cloud_api_requests_failed_total', {'service': 'RunInstances'}) is None
        assert elapsed >= 60 / 4 - 3                       # the shared bucket paced it under EC2's limit
    finally:
        bench.stop()
