"""Running the ```bash blocks of a markdown document as a newcomer would: one bash script per block (`set -e`,
the failing command named), in a clean shell (`env -i HOME=<empty dir> PATH=/usr/bin:/bin`) from the repository
root; and the lab lock (/tmp/steward-lab.lock) every user of `make lab`'s fixed addresses holds.

Used by test_readme_commands.py (every block of the README) and test_machines_walkthrough.py (the walk-through
section of docs/machines.md).
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import subprocess
import time
from typing import Dict, List, NamedTuple, Optional, Tuple

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAB_LOCK = '/tmp/steward-lab.lock'
LAB_ADDRESS = ('127.0.0.11', 2379)  # etcd1 of `make lab`
LAB_WORDS = re.compile(r'\bmake (lab|demo)\b|lab/lab\.py|\.lab/')
LOCK_WAIT = 1200


class Block(NamedTuple):
    number: int
    line: int          # the line of its opening fence in the document (1-based)
    code: List[str]    # its lines, comments dropped (run as they are: loops and heredocs keep working)
    commands: List[str]  # its commands, `\\` continuations joined


def strip_comment(line: str) -> str:
    """The line without a trailing `# comment` (a # inside quotes or a word is kept)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in '"\'':
            quote = ch
        elif ch == '#' and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def bash_blocks(text: str, first_line: int = 1) -> List[Block]:
    """The ```bash (or ```sh, ```shell) blocks of a markdown text (`first_line`: the text's first line number in
    its document)."""
    blocks: List[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not re.match(r'^\s*```\s*(bash|sh|shell)\s*$', lines[i]):
            i += 1
            continue
        start = i + first_line
        code: List[str] = []
        commands: List[str] = []
        pending = ''
        i += 1
        while i < len(lines) and not re.match(r'^\s*```\s*$', lines[i]):
            line = strip_comment(lines[i])
            if line.strip():
                code.append(line)
            if line.endswith('\\'):
                pending += line[:-1] + ' '
            elif line.strip() or pending:
                commands.append((pending + line).strip())
                pending = ''
            i += 1
        blocks.append(Block(len(blocks) + 1, start, code, [c for c in commands if c]))
        i += 1
    return blocks


def section(text: str, heading: str) -> Tuple[str, int]:
    """The part of a markdown text from the heading that starts with `heading` up to the next heading of the same
    or a higher level, and the line number it starts at."""
    lines = text.splitlines()
    level = len(heading) - len(heading.lstrip('#'))
    start = next(i for i, line in enumerate(lines) if line.startswith(heading))
    end = next((j for j in range(start + 1, len(lines))
                if re.match(r'^#{1,%d} ' % level, lines[j])), len(lines))
    return '\n'.join(lines[start:end]), start + 1


def script_of(block: Block, not_run: Optional[Dict[str, Tuple[str, str]]] = None) -> str:
    """The block as one bash script: stop at the first failing command and say which it was. `not_run`:
    command -> (why it is not run, the command that checks it instead)."""
    lines = ['set -e', 'trap \'echo "command failed (rc=$?): $BASH_COMMAND" >&2\' ERR']
    for line in block.code:
        if not_run and line.strip() in not_run:
            why, check = not_run[line.strip()]
            lines += ['echo "not run: %s (%s); checking: %s"' % (line.strip(), why, check), check]
        else:
            lines.append(line)
    return '\n'.join(lines) + '\n'


def uses_lab(block: Block, not_run: Optional[Dict[str, Tuple[str, str]]] = None) -> bool:
    return any(LAB_WORDS.search(c) for c in block.commands if c not in (not_run or {}))


def lab_is_up() -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(LAB_ADDRESS) == 0


def clean_env(home: str) -> Dict[str, str]:
    return {'HOME': home, 'PATH': '/usr/bin:/bin', 'LANG': 'C.UTF-8'}


def run_clean(script: str, home: str, log_path: str, timeout: float) -> subprocess.CompletedProcess:
    with open(log_path, 'w') as log:
        return subprocess.run(['/bin/bash', '-c', script], cwd=REPO, env=clean_env(home), stdout=log,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=timeout, check=False)


class LabLock:
    """/tmp/steward-lab.lock, waited for with a deadline (every user of the lab's fixed addresses takes it)."""

    def __init__(self, wait: float = LOCK_WAIT):
        self.wait = wait

    def __enter__(self) -> 'LabLock':
        self.file = open(LAB_LOCK, 'a')
        deadline = time.monotonic() + self.wait
        while True:
            try:
                fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() > deadline:
                    self.file.close()
                    pytest.fail('%s was held by another lab user for %d s' % (LAB_LOCK, self.wait))
                time.sleep(1)

    def __exit__(self, *exc) -> None:
        fcntl.flock(self.file, fcntl.LOCK_UN)
        self.file.close()
