"""Synthetic BioCoder rows: small sequence-analysis programs that need only the standard library.

Each program seeds its own random inputs, so the reference output is deterministic; one marker is indented
inside a class to exercise method splicing.
"""

from __future__ import annotations

import hashlib
from typing import Any

_HEADER = "import random\nimport re\nfrom collections import Counter\n"
_MAIN = '\nif __name__ == "__main__":\n    main()\n'

# (signature, problem, solution, context-without-header)
_CASES: list[tuple[str, str, str, str]] = [
    (
        "def gc_content(seq)",
        "Write gc_content(seq): the fraction of G and C bases in a DNA string (upper or lower case), "
        "0.0 for an empty string.",
        "def gc_content(seq):\n    seq = seq.upper()\n    if not seq:\n        return 0.0\n"
        "    return (seq.count('G') + seq.count('C')) / len(seq)\n",
        "<<insert solution here>>\ndef main():\n    random.seed(7)\n    for n in (0, 5, 40, 200):\n"
        "        s = ''.join(random.choice('ACGTacgt') for _ in range(n))\n"
        "        print(n, round(gc_content(s), 6))\n",
    ),
    (
        "def reverse_complement(seq)",
        "Write reverse_complement(seq) for an upper-case DNA string over A, C, G, T and N (N pairs with N).",
        "def reverse_complement(seq):\n    pairs = {'A': 'T', 'T': 'A', 'C': 'G', 'G': 'C', 'N': 'N'}\n"
        "    return ''.join(pairs[b] for b in reversed(seq))\n",
        "<<insert solution here>>\ndef main():\n    random.seed(11)\n    for _ in range(4):\n"
        "        s = ''.join(random.choice('ACGTN') for _ in range(30))\n"
        "        print(s, reverse_complement(s))\n",
    ),
    (
        "def kmer_counts(self, k)",
        "Complete the method kmer_counts(self, k) of SequenceProfile: a dict mapping every k-mer of "
        "self.sequence (overlapping windows) to its count.",
        "def kmer_counts(self, k):\n    counts = {}\n    for i in range(len(self.sequence) - k + 1):\n"
        "        kmer = self.sequence[i:i + k]\n        counts[kmer] = counts.get(kmer, 0) + 1\n"
        "    return counts\n",
        "class SequenceProfile:\n    def __init__(self, sequence):\n        self.sequence = sequence\n"
        "    <<insert solution here>>\ndef main():\n    random.seed(3)\n"
        "    s = ''.join(random.choice('ACGT') for _ in range(60))\n    profile = SequenceProfile(s)\n"
        "    for k in (1, 2, 3):\n        print(k, sorted(profile.kmer_counts(k).items())[:6])\n",
    ),
    (
        "def hamming_distance(a, b)",
        "Write hamming_distance(a, b): the number of positions where two equal-length sequences differ; "
        "raise ValueError when the lengths differ.",
        "def hamming_distance(a, b):\n    if len(a) != len(b):\n        raise ValueError('lengths differ')\n"
        "    return sum(x != y for x, y in zip(a, b))\n",
        "<<insert solution here>>\ndef main():\n    random.seed(5)\n    for _ in range(3):\n"
        "        a = ''.join(random.choice('ACGT') for _ in range(25))\n"
        "        b = ''.join(random.choice('ACGT') for _ in range(25))\n"
        "        print(hamming_distance(a, b))\n"
        "    try:\n        hamming_distance('AC', 'A')\n"
        "    except ValueError:\n        print('mismatch detected')\n",
    ),
    (
        "def translate(seq)",
        "Write translate(seq): translate a DNA string codon by codon with the CODONS table, stopping at the "
        "first stop codon ('*', not included); ignore a trailing partial codon; unknown codons become 'X'.",
        "def translate(seq):\n    protein = []\n    for i in range(0, len(seq) - 2, 3):\n"
        "        aa = CODONS.get(seq[i:i + 3], 'X')\n        if aa == '*':\n            break\n"
        "        protein.append(aa)\n    return ''.join(protein)\n",
        "CODONS = {'ATG': 'M', 'GCT': 'A', 'GCC': 'A', 'TGG': 'W', 'AAA': 'K', 'GAA': 'E', 'TTT': 'F',\n"
        "          'TAA': '*', 'TAG': '*', 'TGA': '*'}\n<<insert solution here>>\ndef main():\n"
        "    random.seed(9)\n    codons = list(CODONS) + ['CCC', 'GGG']\n    for _ in range(4):\n"
        "        s = 'ATG' + ''.join(random.choice(codons) for _ in range(8)) + 'GC'\n"
        "        print(translate(s))\n",
    ),
    (
        "def parse_fasta(text)",
        "Write parse_fasta(text): parse FASTA text into a list of (name, sequence) tuples; the name is the "
        "header line after '>' up to the first whitespace, sequence lines are joined without whitespace.",
        "def parse_fasta(text):\n    records, name, parts = [], None, []\n    for line in text.splitlines():\n"
        "        line = line.strip()\n        if line.startswith('>'):\n            if name is not None:\n"
        "                records.append((name, ''.join(parts)))\n"
        "            name, parts = line[1:].split()[0], []\n        elif line:\n            parts.append(line)\n"
        "    if name is not None:\n        records.append((name, ''.join(parts)))\n    return records\n",
        "def main():\n    random.seed(13)\n    chunks = []\n    for i in range(3):\n"
        "        seq = ''.join(random.choice('ACGT') for _ in range(30))\n"
        "        chunks.append(f'>seq{i} sample {i}\\n' + seq[:15] + '\\n' + seq[15:] + '\\n\\n')\n"
        "    for name, seq in parse_fasta(''.join(chunks)):\n"
        "        print(name, seq, Counter(seq).most_common(1))\n"
        "<<insert solution here>>\n",
    ),
]


def sample_rows() -> list[dict[str, Any]]:
    from medagentgym.tasks.biocoder import splice

    rows = []
    for signature, problem, solution, body in _CASES:
        context = _HEADER + body + _MAIN
        rows.append(
            {
                "idx": hashlib.sha256(signature.encode()).hexdigest(),
                "problem": f"This is in python\n{problem}",
                "solution": solution,
                "context": context,
                "signature": signature,
                "code": splice(context, solution),
            }
        )
    return rows
