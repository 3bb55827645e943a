/**
 * The simulated banks' HTTP API as integrations see it: paths and the JSON they answer.
 * The simulator builds these documents; the integration handlers validate answers with the
 * same schemas (unknown fields are dropped, as an integration should tolerate new ones).
 */
import { z } from 'zod';

/** Account ids a bank accepts in its paths. */
export const accountIdPattern = /^[A-Za-z0-9._-]{1,64}$/;
export const accountIdRule = '1-64 characters of A-Z, a-z, 0-9, ".", "_", "-"';

/** Pages of transactions are numbered from 1; the simulator refuses pages past this. */
export const maxTransactionsPage = 1000;

export const accountPath = (bank: string, accountId: string) => `/banks/${encodeURIComponent(bank)}/accounts/${encodeURIComponent(accountId)}`;
export const transactionsPath = (bank: string, accountId: string, page: number) => `${accountPath(bank, accountId)}/transactions?page=${page}`;

const minorUnits = z.number().int();

export const bankAccountSchema = z.object({
  id: z.string(),
  bank: z.string(),
  iban: z.string(),
  bic: z.string(),
  currency: z.string().length(3),
  product: z.string(),
  openedAt: z.string(),
  holder: z.object({
    name: z.string(),
    address: z.object({ street: z.string(), postcode: z.string(), city: z.string(), country: z.string() }),
  }),
  balances: z.array(z.object({ type: z.enum(['booked', 'available', 'expected']), amountMinor: minorUnits, at: z.string() })),
  overdraftLimitMinor: minorUnits,
  cards: z.array(z.object({ id: z.string(), network: z.string(), last4: z.string(), status: z.string(), expires: z.string() })),
  standingOrders: z.array(
    z.object({ id: z.string(), counterparty: z.string(), iban: z.string(), amountMinor: minorUnits, dayOfMonth: z.number().int(), reference: z.string() }),
  ),
  /** How many pages GET .../transactions has for this account. */
  transactionPages: z.number().int().min(0),
});

export const bankTransactionSchema = z.object({
  id: z.string(),
  bookedAt: z.string(),
  valueDate: z.string(),
  status: z.enum(['booked', 'pending']),
  /** Negative for money out. */
  amountMinor: minorUnits,
  currency: z.string().length(3),
  counterparty: z.object({ name: z.string(), iban: z.string().nullable() }),
  description: z.string(),
  /** ISO 18245 merchant category code of card payments; null for transfers. */
  merchantCategoryCode: z.string().nullable(),
  reference: z.string(),
  balanceAfterMinor: minorUnits,
});

export const transactionsPageSchema = z.object({
  accountId: z.string(),
  page: z.number().int(),
  pageCount: z.number().int(),
  transactions: z.array(bankTransactionSchema),
  nextPage: z.number().int().nullable(),
});

export type BankAccount = z.infer<typeof bankAccountSchema>;
export type BankTransaction = z.infer<typeof bankTransactionSchema>;
export type TransactionsPage = z.infer<typeof transactionsPageSchema>;

/** The body of every answer that is not a 2xx. */
export interface BankErrorBody {
  error: { code: string; message: string };
}
