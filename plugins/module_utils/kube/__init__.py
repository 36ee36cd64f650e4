# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes API as every area uses it (the floor above `common`; it imports no other area).

  client.py      KubeClient: requests with a deadline, typed errors (errors.py: KubeError and its kinds)
  args.py        the modules' connection options (kubernetes.core's names) and the client they build
  ratelimit.py   client-go's QPS/burst over common/ratelimit's bucket; a rate-limited client
  selectors.py   label selectors, both forms; objects.py RFC 7386 merge patch on plain data
  watch.py       list, then watch (resumed after idle timeouts and breaks)
  conditions.py  status conditions; events.py Events on the object an action concerned
  lease.py       Leases: leader election, the cluster-wide mutex, Lease specs and expiry
  secrets.py     reading a Secret a custom resource names (the controller's opt-in rule, the one decoder)
  drain.py       cordon, uncordon and drain with kubectl drain's rules (Eviction API, PodDisruptionBudgets)
"""
