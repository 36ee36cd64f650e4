# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes, as every area needs it: the client and the API's own conventions, nothing area-specific.

  client.py      a small REST client over the official client's transport and auth; args.py: its module options
  errors.py      API failures, by what the caller does about them
  watch.py       list, then watch (the informer pattern without a cache)
  ratelimit.py   client-go's QPS/Burst token bucket
  selectors.py   label selectors as the API server reads them
  conditions.py  status conditions;  events.py: Events on the object an action concerned
  lease.py       Leases for leader election and as a cluster-wide mutex
  secrets.py     which Secrets the controller may read on a custom resource's behalf
"""
