"""The local lab (`make lab`, `make demo`) and the environments tests and benchmarks build from it.

The map: `manager.py` (etcd members by the collection's role, sabakan, the cloud; its command line is
`python lab/lab.py up|down|status|partition|heal`), `parts.py` (the cloud's processes: API emulator, EC2, node
emulator, controller), `paths.py` (the checkout's paths); the emulators in `kube/`, `cloud/` and `sabakan/`; the
provisioning hosts in `provisioning/` (`python lab/hosts.py`); builders in `env/`; the demo in `demo/`
(`python -m lab.demo`). `machines_walkthrough.py` is the script docs/machines.md's walk-through runs.

Dependencies go one way: tests and benchmarks import the lab, the lab never imports `tests/`. Lab programs run as
modules from the repository root (`python -m lab.kube.api ...`), so nothing here edits sys.path but the two scripts
the docs name (lab/lab.py, lab/hosts.py). docs/lab.md has the lab's contract."""
