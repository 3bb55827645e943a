/**
 * The garbage a handler makes with an upstream's JSON answer: the answer's text, the parsed
 * document, a reshaped copy and its text. The demo handlers make it on request
 * ({"allocateKb": N}) and hold it while they wait, so a parallel worker fills its young
 * generation as a real one does.
 */

/** One record of the upstream's answer, as a bank's API might send it. */
interface UpstreamTransaction {
  id: string;
  bookedAt: string;
  amountMinor: number;
  currency: string;
  counterparty: string;
  reference: string;
}

/** The same record reshaped for our client. */
interface StatementLine {
  transactionId: string;
  date: string;
  amount: number;
  currency: string;
  description: string;
}

/** What a handler holds: every stage is live until it lets go of this. */
export interface ProcessedAnswer {
  /** Length of the upstream's JSON text. */
  answerBytes: number;
  document: readonly UpstreamTransaction[];
  statement: readonly StatementLine[];
  statementJson: string;
}

/** The largest answer a demo task may ask for: bounds one task's memory. */
export const maxAnswerKb = 16_384;

const currencies = ['EUR', 'GBP', 'USD', 'CHF'] as const;

function transaction(index: number, seed: string): UpstreamTransaction {
  const amountMinor = Math.round(Math.random() * 1_000_000) - 500_000;
  return {
    id: `${seed}-${index}`,
    bookedAt: new Date(Date.UTC(2026, 0, 1) + index * 60_000).toISOString(),
    amountMinor,
    currency: currencies[index % currencies.length]!,
    counterparty: `Counterparty ${index % 997} Ltd`,
    reference: `invoice ${amountMinor.toString(36)} of ${seed}`,
  };
}

/** The upstream's answer: a JSON array of transactions, at least `bytes` long (one record more at most). */
export function upstreamAnswerJson(bytes: number, seed: string): string {
  const records: string[] = [];
  let length = 2;
  // Bounded: every record adds well over one character.
  for (let index = 0; length < bytes; index++) {
    const record = JSON.stringify(transaction(index, seed));
    records.push(record);
    length += record.length + 1;
  }
  return `[${records.join(',')}]`;
}

/** Builds an answer of about `kb` KiB, parses it, reshapes every record and serialises the result. */
export function processUpstreamAnswer(kb: number, seed: string): ProcessedAnswer {
  const answer = upstreamAnswerJson(kb * 1024, seed);
  const document = JSON.parse(answer) as UpstreamTransaction[];
  const statement = document.map((t): StatementLine => ({
    transactionId: t.id,
    date: t.bookedAt.slice(0, 10),
    amount: t.amountMinor / 100,
    currency: t.currency,
    description: `${t.counterparty}: ${t.reference}`,
  }));
  return { answerBytes: answer.length, document, statement, statementJson: JSON.stringify(statement) };
}
