# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every area shares: the floor of the engine (it imports nothing of the areas above it).

Input:
  errors.py         InvalidInput (field, rule, value) and its recasting into an area's own type
  validate.py       the checks of option values; names.py DNS names, label keys and values; durations.py Go durations
  argspec.py        merging the modules' argument specs
  module_errors.py  an engine error as a module's fail_json
Time, retries, limits:
  deadline.py       Deadline / Budget, the one retry loop (retry_until), doubling and full-jitter backoffs
  http_deadline.py  a deadline over a whole HTTP (or SMTP) exchange: the sockets are watched and cut
  times.py          RFC 3339 read and written (s, us, ns; Go's RFC3339Nano)
  ratelimit.py      the token bucket
The host:
  files.py          files replaced atomically and durably (write_atomic), private files and directories
  commands.py       a tool run within a deadline (its process group killed at the end); systemd.py systemctl
Small translations of Go and of URLs: golang.py (strconv.ParseBool), netaddr.py (an IPv6 address as a URL host).
"""
