"""The Kubernetes API emulator (kmock with the API server's behaviour the controller relies on). `api.py` serves it
over HTTP (`KubeServer`, `python -m lab.kube.api serve`); `emulator.py` is the API server itself, and the rest its
concerns: `objects.py` (merge and patch), `index.py` (list by key), `selectors.py` (label and field selectors, a
second implementation on purpose), `rules.py` (what the API server refuses), `eviction.py` (the Eviction API and
PodDisruptionBudgets), `workloads.py` (scale subresources, status movers), `tokenreview.py`. It imports no engine
code: a test double must not import the code it stands in front of."""
