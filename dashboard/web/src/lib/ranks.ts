// Which rank printed a line, and rank selections: the same rules as
// pkg/logs (rank.go) and the SDK (mpijob.logs), checked against the shared
// vectors in pkg/logs/testdata/rank-vectors.json.

/** The tag mpirun puts before a rank's line (OpenMPI 4.1's orte_tag_output): [JOBID,RANK]<stdout>:TEXT; mpijob-mpiexec's Hydra: [PG,RANK]<stdio>:TEXT. */
const RANK_TAG = /^\[\d+,(\d+)\]<(stdout|stderr|stddiag|stdio)>:/;
/** The label the merged view ("All") puts before each line. */
const LABEL = /^\[(?:launcher|worker-\d+)\] /;
export const MAX_SELECTION = 65536;
const HELP = 'give a rank number, a range like 0-3, or a list like 0,2,5-7';

export interface Tagged {
  rank: number;
  stream: string;
  message: string;
}

/** The rank tag of a line's text (time already cut), or null. */
export function splitRank(text: string): Tagged | null {
  const m = RANK_TAG.exec(text);
  if (!m) return null;
  return { rank: Number(m[1]), stream: m[2], message: text.slice(m[0].length) };
}

/** The rank of a line as the log view shows it (after a [launcher] label), or null. */
export function lineRank(line: string): number | null {
  return splitRank(line.replace(LABEL, ''))?.rank ?? null;
}

/** A rank selection: 3, 0-3, 0,2,5-7. Throws an Error that says what is wrong. */
export function parseSelection(spec: string): Set<number> {
  if (spec.trim() === '') throw new Error(HELP);
  const out = new Set<number>();
  for (const raw of spec.split(',')) {
    const part = raw.trim();
    const [lo, hi, ...rest] = part.split('-');
    const isNum = (s: string | undefined) => s !== undefined && /^\d+$/.test(s);
    if (rest.length > 0 || !isNum(lo) || (hi !== undefined && !isNum(hi))) throw new Error(`${part}: ${HELP}`);
    const a = Number(lo);
    const b = hi === undefined ? a : Number(hi);
    if (b < a) throw new Error(`${part}: a range goes from low to high, e.g. ${b}-${a}`);
    if (b - a + 1 + out.size > MAX_SELECTION) throw new Error(`${part}: at most ${MAX_SELECTION} ranks in a selection`);
    for (let r = a; r <= b; r++) out.add(r);
  }
  return out;
}
