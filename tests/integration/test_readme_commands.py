"""Every ```bash block of the README runs, exactly as written, in a clean shell.

A newcomer's shell has no venv on PATH, no etcd, none of the Makefile's variables: each block runs as
one bash script (`set -e`, so any failing command fails it) under `env -i HOME=<empty dir>
PATH=/usr/bin:/bin` from the repository root, after `make all` (which `make test` and CI run first).
The test parses the README, so a block someone adds later is covered without touching this file.

What is not run, and how it is checked instead (NOT_RUN): `make test` is what CI runs and would run
this test again, so only its target is checked (`make -n test`).

`make demo` is run in full (it is the main job; ~6 min on a loaded 2-core machine, ~3 min idle).
Blocks that use the lab (fixed loopback addresses) hold /tmp/steward-lab.lock, the lock every lab user
takes, and always end with `make lab-down`; when a lab is already up on the lab's addresses (a
developer's own), the block is skipped rather than taking that lab down.
"""

from __future__ import annotations

import fcntl
import os
import re
import socket
import subprocess
import time
from typing import List, NamedTuple

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
README = os.path.join(REPO, 'README.md')
LAB_LOCK = '/tmp/steward-lab.lock'
LAB_ADDRESS = ('127.0.0.11', 2379)  # etcd1 of `make lab`
LAB_WORDS = re.compile(r'\bmake (lab|demo)\b|lab/lab\.py|\.lab/')
# command -> (why it is not run, the command that checks it instead)
NOT_RUN = {
    'make test': ('CI runs it, and it would run this test again', 'make -n test'),
}
BLOCK_TIMEOUT = 1800
LOCK_WAIT = 1200


class Block(NamedTuple):
    number: int
    line: int          # the line of its opening fence in the README (1-based)
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


def bash_blocks(text: str) -> List[Block]:
    """The ```bash (or ```sh, ```shell) blocks of a markdown text."""
    blocks: List[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not re.match(r'^\s*```\s*(bash|sh|shell)\s*$', lines[i]):
            i += 1
            continue
        start = i + 1
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


def script_of(block: Block) -> str:
    """The block as one bash script: stop at the first failing command and say which it was."""
    lines = ['set -e', 'trap \'echo "README command failed (rc=$?): $BASH_COMMAND" >&2\' ERR']
    for line in block.code:
        if line.strip() in NOT_RUN:
            why, check = NOT_RUN[line.strip()]
            lines += ['echo "not run: %s (%s); checking: %s"' % (line.strip(), why, check), check]
        else:
            lines.append(line)
    return '\n'.join(lines) + '\n'


def uses_lab(block: Block) -> bool:
    return any(LAB_WORDS.search(c) for c in block.commands if c not in NOT_RUN)


def lab_is_up() -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(LAB_ADDRESS) == 0


def clean_env(home: str) -> dict:
    return {'HOME': home, 'PATH': '/usr/bin:/bin', 'LANG': 'C.UTF-8'}


def run_clean(script: str, home: str, log_path: str) -> subprocess.CompletedProcess:
    with open(log_path, 'w') as log:
        return subprocess.run(['/bin/bash', '-c', script], cwd=REPO, env=clean_env(home), stdout=log,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=BLOCK_TIMEOUT, check=False)


class LabLock:
    """/tmp/steward-lab.lock, waited for with a deadline."""

    def __enter__(self) -> 'LabLock':
        self.file = open(LAB_LOCK, 'a')
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(self.file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() > deadline:
                    self.file.close()
                    pytest.fail('%s was held by another lab user for %d s' % (LAB_LOCK, LOCK_WAIT))
                time.sleep(1)

    def __exit__(self, *exc) -> None:
        fcntl.flock(self.file, fcntl.LOCK_UN)
        self.file.close()


BLOCKS = bash_blocks(open(README).read())


def test_the_readme_has_runnable_blocks():
    assert BLOCKS, 'README.md has no ```bash block'
    assert any(c == 'make demo' for b in BLOCKS for c in b.commands), 'the README no longer shows `make demo`'


@pytest.mark.timeout(BLOCK_TIMEOUT + LOCK_WAIT + 120)
@pytest.mark.parametrize('block', BLOCKS, ids=lambda b: 'block%d-%s' % (b.number, b.commands[0] if b.commands else 'empty'))
def test_readme_block_runs_in_a_clean_shell(block, tmp_path):
    home = str(tmp_path / 'home')
    os.makedirs(home)
    log_path = str(tmp_path / 'block.log')
    script = script_of(block)
    if uses_lab(block):
        # whatever happens, the lab this block started is brought down again
        script = 'trap "make lab-down >/dev/null 2>&1" EXIT\n' + script
        with LabLock():
            if lab_is_up():
                pytest.skip('a lab is up on %s:%d (someone\'s own): `make lab-down` to run the README lab commands'
                            % LAB_ADDRESS)
            proc = run_clean(script, home, log_path)
            assert not lab_is_up(), 'README block %d left a lab running' % block.number
    else:
        proc = run_clean(script, home, log_path)
    with open(log_path) as f:
        output = f.read()
    assert proc.returncode == 0, 'README.md block %d (line %d) failed with rc=%d in a clean shell; last output:\n%s' % (
        block.number, block.line, proc.returncode, output[-6000:])


# --- the parser (so a README edit cannot silently stop a block from running) ----------------------
def test_parser_reads_commands_comments_and_continuations():
    text = '\n'.join([
        'intro', '```bash', 'make demo   # comment', '            # more comment', 'make test',
        'export A=1 \\', '  B=2   # both', 'echo "a # b" # c', '```', '```yaml', 'key: value', '```',
        '```sh', '.venv/bin/x --flag', '```'])
    blocks = bash_blocks(text)
    assert [b.commands for b in blocks] == [
        ['make demo', 'make test', 'export A=1    B=2', 'echo "a # b"'], ['.venv/bin/x --flag']]
    assert blocks[0].code == ['make demo', 'make test', 'export A=1 \\', '  B=2', 'echo "a # b"']
    assert blocks[0].line == 2 and blocks[1].line == 13
    script = script_of(blocks[0])
    assert 'make -n test' in script and '\nmake test\n' not in script and '\nmake demo\n' in script
    assert uses_lab(Block(1, 1, [], ['make lab'])) and uses_lab(Block(1, 1, [], ['make demo']))
    assert not uses_lab(Block(1, 1, [], ['make test'])) and not uses_lab(Block(1, 1, [], ['make dist']))


def test_a_failing_command_fails_the_block(tmp_path):
    block = bash_blocks('```bash\ntrue\nfalse   # fails\necho never\n```\n')[0]
    proc = run_clean(script_of(block), str(tmp_path), str(tmp_path / 'log'))
    output = (tmp_path / 'log').read_text()
    assert proc.returncode != 0 and 'README command failed (rc=1): false' in output and 'never' not in output


def test_the_clean_shell_has_no_venv_and_no_etcd(tmp_path):
    block = bash_blocks('```bash\necho "PATH=$PATH"; command -v etcd || echo no-etcd\n```\n')[0]
    run_clean(script_of(block), str(tmp_path), str(tmp_path / 'log'))
    output = (tmp_path / 'log').read_text()
    assert 'PATH=/usr/bin:/bin\n' in output and '.venv' not in output
