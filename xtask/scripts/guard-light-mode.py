#!/usr/bin/env python3
"""How much of herd-guards' table (guards/tests/it/table.rs) a word lexer could judge.

A lighter guard without tree-sitter would split a command line into words the way
shell-words does (quotes, escapes, blanks; `$NAME` kept as a dynamic word) and judge
each simple command. It has no structure for command and process substitution,
here-documents, subshells, groups, functions, compound commands or `${...}` expansion.
This counts the table's rows that contain such a construct: a light mode must either
refuse them (wrong on the allow rows counted) or let them through (wrong on the block
rows counted). Run from the workspace root: `python3 xtask/scripts/guard-light-mode.py`.
"""
import re, shlex, json
src = open('guards/tests/it/table.rs').read()
rows = []
for kind in ('block', 'allow'):
    for m in re.finditer(kind + r'! \{(.*?)\n\}', src, re.S):
        for r in re.finditer(r'^\s*(b\d+\w*): ("(?:[^"\\]|\\.)*"|r#".*?"#)', m.group(1), re.M):
            lit = r.group(2)
            if lit.startswith('r#'):
                cmd = lit[3:-2]
            else:
                cmd = lit[1:-1].encode().decode('unicode_escape')
            rows.append((kind, r.group(1), cmd))
# Constructs a word lexer (shell-words: quotes, escapes, whitespace) has no structure for.
constructs = {
    'command substitution': re.compile(r'\$\(|`'),
    'process substitution': re.compile(r'[<>]\('),
    'here-document/string': re.compile(r'<<'),
    'subshell, group or function': re.compile(r'(^|[;&|\s])[({]\s|\(\)\s*\{|^\(|\|\s*\('),
    'compound command': re.compile(r'(^|[;&|]\s*|\s)(if|for|while|until|case|select)\s'),
    'parameter expansion': re.compile(r'\$\{'),
    'arithmetic': re.compile(r'\$\(\('),
}
def lexable(cmd):
    try:
        shlex.split(cmd, posix=True); return True
    except ValueError:
        return False
stats = {'block': [0, 0, 0], 'allow': [0, 0, 0]}
per = {}
for kind, name, cmd in rows:
    hit = [k for k, r in constructs.items() if r.search(cmd)]
    bad_lex = not lexable(cmd)
    s = stats[kind]; s[0] += 1
    if hit or bad_lex:
        s[1] += 1
        for k in hit + (['not tokenizable'] if bad_lex else []):
            per.setdefault((kind, k), []).append(cmd)
print({k: {'rows': v[0], 'need_structure': v[1]} for k, v in stats.items()})
for (kind, k), v in sorted(per.items()):
    print(kind, k, len(v), v[:3])
