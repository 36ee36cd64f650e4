"""The lab's cloud: `ec2_fidelity.py` (EC2 and S3 in front of moto with AWS's behaviour: idempotency, rate limits,
describe filters; `python -m lab.cloud.ec2_fidelity serve`), `moto_index.py` (its lookups by id and tag) and the node
emulator `nodes.py` (kubelets and node lifecycle controllers for the running instances; `python -m lab.cloud.nodes
run`) with its pure part `node_objects.py`. No engine code."""
