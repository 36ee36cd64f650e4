# -*- coding: utf-8 -*-
# Copyright: steward.cluster contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""Repair and health-check commands for the lab, called as CKE calls them: the machine's address comes last.

    sabakan_repair_tool.py --url http://127.0.0.1:10180 set-state healthy 10.69.0.4   # a repair command
    sabakan_repair_tool.py --url http://127.0.0.1:10180 health 10.69.0.4             # prints true or false

`set-state` finds the machine's serial by its address (searchMachines) and moves it with sabakan's REST API,
`PUT /api/v1/state/<serial>` (body: the state in lower case), as a real repair script would after a BMC reset;
`health` prints `true` when sabakan says the machine is HEALTHY. Standard library only: it runs wherever the
controller runs. It is a lab stand-in for a site's own scripts (ipmitool, sabactl), not part of the collection.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
import urllib.request
from typing import Any, Dict, List, Optional

QUERY = 'query { searchMachines(having: null, notHaving: null) { spec { serial ipv4 } status { state } } }'
TIMEOUT = 10.0


def machines(url: str) -> List[Dict[str, Any]]:
    request = urllib.request.Request(url.rstrip('/') + '/graphql', data=json.dumps({'query': QUERY}).encode(),
                                     headers={'Content-Type': 'application/json'})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
        body = json.loads(answer.read())
    if body.get('errors'):
        raise RuntimeError('sabakan: %s' % body['errors'])
    return body['data']['searchMachines']


def machine_at(url: str, address: str) -> Optional[Dict[str, Any]]:
    for machine in machines(url):
        if address in (machine['spec'].get('ipv4') or []):
            return machine
    return None


def set_state(url: str, serial: str, state: str) -> None:
    request = urllib.request.Request('%s/api/v1/state/%s' % (url.rstrip('/'), urllib.parse.quote(serial)),
                                     data=state.lower().encode(), method='PUT')
    with urllib.request.urlopen(request, timeout=TIMEOUT):
        pass


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n', maxsplit=1)[0])
    parser.add_argument('--url', required=True, help='the lab sabakan server, http://host:port')
    sub = parser.add_subparsers(dest='command', required=True)
    p_set = sub.add_parser('set-state', help='move the machine at ADDRESS to STATE')
    p_set.add_argument('state')
    p_set.add_argument('address')
    p_health = sub.add_parser('health', help='print true when the machine at ADDRESS is HEALTHY')
    p_health.add_argument('address')
    args = parser.parse_args(argv)
    machine = machine_at(args.url, args.address)
    if machine is None:
        print('no machine with address %s' % args.address, file=sys.stderr)
        return 2
    if args.command == 'health':
        print('true' if machine['status']['state'] == 'HEALTHY' else 'false')
        return 0
    set_state(args.url, machine['spec']['serial'], args.state)
    print('machine %s (%s): %s -> %s' % (machine['spec']['serial'], args.address, machine['status']['state'],
                                         args.state.upper()))
    return 0


if __name__ == '__main__':
    sys.exit(main())
