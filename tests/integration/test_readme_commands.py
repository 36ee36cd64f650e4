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

import os

import pytest

from support.doc_blocks import REPO, LAB_ADDRESS, Block, LabLock, bash_blocks, lab_is_up, run_clean
from support.doc_blocks import script_of as block_script
from support.doc_blocks import uses_lab as block_uses_lab

README = os.path.join(REPO, 'README.md')
# command -> (why it is not run, the command that checks it instead)
NOT_RUN = {
    'make test': ('CI runs it, and it would run this test again', 'make -n test'),
}
BLOCK_TIMEOUT = 1800
LOCK_WAIT = 1200


def script_of(block: Block) -> str:
    return block_script(block, NOT_RUN)


def uses_lab(block: Block) -> bool:
    return block_uses_lab(block, NOT_RUN)


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
        with LabLock(LOCK_WAIT):
            if lab_is_up():
                pytest.skip('a lab is up on %s:%d (someone\'s own): `make lab-down` to run the README lab commands'
                            % LAB_ADDRESS)
            proc = run_clean(script, home, log_path, BLOCK_TIMEOUT)
            assert not lab_is_up(), 'README block %d left a lab running' % block.number
    else:
        proc = run_clean(script, home, log_path, BLOCK_TIMEOUT)
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
    proc = run_clean(script_of(block), str(tmp_path), str(tmp_path / 'log'), 60)
    output = (tmp_path / 'log').read_text()
    assert proc.returncode != 0 and 'command failed (rc=1): false' in output and 'never' not in output


def test_the_clean_shell_has_no_venv_and_no_etcd(tmp_path):
    block = bash_blocks('```bash\necho "PATH=$PATH"; command -v etcd || echo no-etcd\n```\n')[0]
    run_clean(script_of(block), str(tmp_path), str(tmp_path / 'log'), 60)
    output = (tmp_path / 'log').read_text()
    assert 'PATH=/usr/bin:/bin\n' in output and '.venv' not in output
