# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every area shares, and the one home of each such helper (nothing here knows an area).

  errors.py         InvalidInput: the one error for bad input (field, value, rule)
  validate.py       the validation home: numbers, timeouts, paths and files, TLS files, endpoint URLs, IP addresses
  names.py          Kubernetes and DNS names;  durations.py: Go durations and the other formats we read
  deadline.py       every timeout is a deadline;  http_deadline.py: one over a whole HTTP exchange
  commands.py       running a tool within a deadline
  argspec.py        a module's argument spec from the shared option groups
  module_errors.py  the one adapter from the engine's errors to a module's result
"""
