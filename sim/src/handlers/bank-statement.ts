/**
 * What a bank integration makes of an account's transactions: each one categorised, then
 * sums per category, income and spending. The little CPU a network-bound task spends.
 */
import type { BankAccount, BankTransaction } from '../bank/api';

/** Categories of card payments by merchant category code (ISO 18245). */
const categoryByMerchantCode: Readonly<Record<string, string>> = {
  '5411': 'groceries',
  '5462': 'groceries',
  '5812': 'eating-out',
  '5814': 'eating-out',
  '4111': 'transport',
  '4121': 'transport',
  '5541': 'transport',
  '4900': 'utilities',
  '4814': 'utilities',
  '4899': 'subscriptions',
  '5732': 'shopping',
  '5942': 'shopping',
  '5912': 'health',
  '6011': 'cash',
};

/** Transfers carry no merchant code: their descriptions tell. */
const categoryByDescription: readonly (readonly [RegExp, string])[] = [
  [/^SALARY\b/, 'salary'],
  [/^RENT\b/, 'housing'],
  [/^REFUND\b/, 'refunds'],
  [/^TRANSFER\b/, 'transfers'],
];

export function categorise(transaction: BankTransaction): string {
  for (const [pattern, category] of categoryByDescription) if (pattern.test(transaction.description)) return category;
  return (transaction.merchantCategoryCode && categoryByMerchantCode[transaction.merchantCategoryCode]) || 'other';
}

export interface CategoryTotal {
  count: number;
  totalMinor: number;
}

export interface StatementSummary {
  currency: string;
  transactions: number;
  pending: number;
  /** Money in, in minor units of the account's currency (positive). */
  incomeMinor: number;
  /** Money out (negative). */
  spendingMinor: number;
  byCategory: Record<string, CategoryTotal>;
  largestDebit: { id: string; amountMinor: number; category: string } | null;
  /** Transactions in another currency than the account's: left out of the sums. */
  foreignCurrency: number;
}

export function summarise(account: BankAccount, transactions: readonly BankTransaction[]): StatementSummary {
  const summary: StatementSummary = {
    currency: account.currency,
    transactions: transactions.length,
    pending: 0,
    incomeMinor: 0,
    spendingMinor: 0,
    byCategory: {},
    largestDebit: null,
    foreignCurrency: 0,
  };
  for (const transaction of transactions) {
    if (transaction.status === 'pending') summary.pending++;
    if (transaction.currency !== account.currency) {
      summary.foreignCurrency++;
      continue;
    }
    const category = categorise(transaction);
    const total = (summary.byCategory[category] ??= { count: 0, totalMinor: 0 });
    total.count++;
    total.totalMinor += transaction.amountMinor;
    if (transaction.amountMinor >= 0) summary.incomeMinor += transaction.amountMinor;
    else {
      summary.spendingMinor += transaction.amountMinor;
      if (summary.largestDebit === null || transaction.amountMinor < summary.largestDebit.amountMinor) {
        summary.largestDebit = { id: transaction.id, amountMinor: transaction.amountMinor, category };
      }
    }
  }
  return summary;
}
