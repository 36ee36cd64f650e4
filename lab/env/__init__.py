"""Environments built from the lab's parts for the demo, the tests and the benchmarks: `controller.py` (the CRDs
installed, `wait_for`, `ControllerProcess`: the real controller against an API), `ec2_server.py` (EC2 with fidelity in
a subprocess), `machines_aws.py` (a VPC, subnets and MachineClass inputs on it), `machines_bench.py` (kubelets on
EC2 instances and the machines controller: `MachinesBench`) and `node_leases.py` (Nodes with Leases renewed like
kubelets do). These are clients of the parts, so unlike the emulators they may use the engine's API client."""
