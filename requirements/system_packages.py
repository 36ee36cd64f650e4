"""The system packages of bindep.txt a profile needs and this Debian machine lacks: what `bindep -b PROFILE` prints.

The Makefile runs this before the venv exists (a fresh Debian 12 has python3.11 but not the `bindep` tool, which
comes from PyPI into the venv), so it reads the part of bindep's format this repository uses with the standard
library only: `name [selector ...]` lines, where a selector is `platform:X` (or `!platform:X`) or a profile name
(or `!profile`). Like bindep: an entry naming no profile is always wanted, one naming profiles only when one of them
is asked for; a platform selector must name one of this machine's platforms. tests/unit/lab/test_system_packages.py
holds it to bindep's own answer.

    python3 requirements/system_packages.py missing test     # one missing package a line, exit 0
    python3 requirements/system_packages.py wanted test      # every package the profile selects here
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from typing import Iterable, List, Sequence, Set

LINE = re.compile(r'^\s*(?P<name>[^\s\[]+)\s*(?:\[(?P<selectors>[^\]]*)\])?')


def platforms() -> Set[str]:
    """This machine's bindep platform names that bindep.txt uses: `dpkg` and the distribution's id (Debian only:
    the Makefile's installer is apt)."""
    found: Set[str] = set()
    if shutil.which('dpkg-query'):
        found.add('dpkg')
    try:
        with open('/etc/os-release') as f:
            for line in f:
                key, _sep, value = line.strip().partition('=')
                if key in ('ID', 'ID_LIKE'):
                    found.update(v.strip('"') for v in value.split())
    except OSError:
        pass
    return found


def wanted(lines: Iterable[str], profiles: Sequence[str], platform_names: Set[str]) -> List[str]:
    """The package names of bindep lines selected for `profiles` on a machine of `platform_names`."""
    names: List[str] = []
    for raw in lines:
        line = raw.split('#', 1)[0].strip()
        if not line:
            continue
        match = LINE.match(line)
        if match is None:
            raise ValueError('bindep.txt: cannot read %r' % raw)
        selectors = (match.group('selectors') or '').split()
        plat_yes = [s[len('platform:'):] for s in selectors if s.startswith('platform:')]
        plat_no = [s[len('!platform:'):] for s in selectors if s.startswith('!platform:')]
        prof_yes = [s for s in selectors if 'platform:' not in s and not s.startswith('!')]
        prof_no = [s[1:] for s in selectors if 'platform:' not in s and s.startswith('!')]
        if plat_yes and not platform_names.intersection(plat_yes):
            continue
        if platform_names.intersection(plat_no):
            continue
        if prof_yes and not set(profiles).intersection(prof_yes):
            continue
        if set(profiles).intersection(prof_no):
            continue
        names.append(match.group('name'))
    return names


def installed(name: str) -> bool:
    proc = subprocess.run(['dpkg-query', '-W', '-f=${Status}', name], capture_output=True, text=True, check=False)
    return proc.returncode == 0 and proc.stdout.strip().endswith('install ok installed')


def main(argv: Sequence[str]) -> int:
    if len(argv) < 1 or argv[0] not in ('missing', 'wanted'):
        print('usage: system_packages.py missing|wanted [profile ...] [--file bindep.txt]', file=sys.stderr)
        return 2
    args = list(argv[1:])
    path = 'bindep.txt'
    if '--file' in args:
        at = args.index('--file')
        path = args[at + 1]
        del args[at:at + 2]
    with open(path) as f:
        names = wanted(f, args, platforms())
    if argv[0] == 'missing':
        names = [n for n in names if not installed(n)]
    for name in names:
        print(name)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
