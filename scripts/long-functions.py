#!/usr/bin/env python3
# Lists functions longer than N lines (brace matching on the source text, not a parser: good
# enough for clang-formatted code). Usage: scripts/long-functions.py N DIR...
import re,sys,os
ctrl=re.compile(r'^\s*(\}\s*)?(if|for|while|switch|else|do|try|catch|namespace|class|struct|enum|union|extern)\b')
def clean(l):
    l=re.sub(r'"(\\.|[^"\\])*"','""',l); l=re.sub(r"'(\\.|[^'\\])*'","''",l)
    return l.split('//')[0]
def scan(path,limit):
    lines=open(path,errors='replace').read().split('\n')
    cl=[clean(l) for l in lines]
    depth=0; i=0
    while i<len(lines):
        l=cl[i]
        is_fn = l.rstrip().endswith('{') and ')' in l and not ctrl.match(l) and not re.search(r'(=|return|\[.*\]\s*\(.*\)\s*(mutable\s*)?(->.*)?\{$|,\s*\{$|\(\s*\{$)',l.split(')')[0]+'') and not re.search(r'\]\s*\([^)]*\)\s*(mutable\s*)?(->[^{]*)?\{\s*$',l) and not re.search(r'\[[^\]]*\]\s*\{\s*$',l)
        if is_fn and re.search(r'\)\s*(const\s*)?(override\s*)?(final\s*)?(noexcept\s*)?(->\s*[\w:<>, ]+\s*)?\{\s*$',l) and not re.match(r'^\s*(return\b|.*=\s*\[)',l):
            d0=depth; d=depth; j=i
            while j<len(lines):
                d+=cl[j].count('{')-cl[j].count('}')
                if d<=d0 and j>i: break
                if d<=d0 and j==i and cl[j].count('{')>0 and cl[j].count('}')>=cl[j].count('{'): break
                j+=1
            n=j-i+1
            if n>limit: print(f"{path}:{i+1}: {n} lines: {lines[i].strip()[:90]}")
        depth+=l.count('{')-l.count('}')
        i+=1
limit=int(sys.argv[1])
for root in sys.argv[2:]:
    for dp,dn,fn in os.walk(root):
        if 'build' in dp.split('/'): continue
        for f in fn:
            if f.endswith(('.cc','.h')): scan(os.path.join(dp,f),limit)
