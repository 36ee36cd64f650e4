"""sabakan's GraphQL API over HTTP (`server.py`, `python -m lab.sabakan.server`) serving a generated data center
(`datacenter.py`). No engine code."""
