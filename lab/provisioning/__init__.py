"""The provisioning hosts cp1-cp3, w1, w2 (`hosts.py`, run as `python lab/hosts.py up`): root prefixes under
`.lab/hosts/` on loopback addresses, each with a static-pod supervisor standing in for its kubelet
(`supervisor.py`, `python -m lab.provisioning.supervisor`)."""
