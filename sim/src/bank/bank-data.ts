/**
 * The documents the simulated banks answer with: an account (3-6 KiB of JSON) and pages of its
 * transactions (80 to 120 each, 35-55 KiB). Each is drawn from its own seeded
 * stream (seed, bank, account, page), so the same request always gets the same document.
 */
import type { BankAccount, BankTransaction, TransactionsPage } from './api';
import { hashSeed, pick, randomInt, seededRandom } from './random';

interface Merchant {
  name: string;
  /** ISO 18245 merchant category code. */
  mcc: string;
  minMinor: number;
  maxMinor: number;
}

const merchants: readonly Merchant[] = [
  { name: 'Fresh Market', mcc: '5411', minMinor: 800, maxMinor: 12_000 },
  { name: 'City Grocer', mcc: '5411', minMinor: 500, maxMinor: 8_000 },
  { name: 'Corner Bakery', mcc: '5462', minMinor: 250, maxMinor: 1_500 },
  { name: 'Trattoria Roma', mcc: '5812', minMinor: 1_500, maxMinor: 9_000 },
  { name: 'Quick Burger', mcc: '5814', minMinor: 600, maxMinor: 1_800 },
  { name: 'Metro Transit', mcc: '4111', minMinor: 200, maxMinor: 1_000 },
  { name: 'RideNow', mcc: '4121', minMinor: 900, maxMinor: 4_000 },
  { name: 'FuelStop', mcc: '5541', minMinor: 3_000, maxMinor: 9_000 },
  { name: 'PowerGrid Energy', mcc: '4900', minMinor: 4_000, maxMinor: 15_000 },
  { name: 'TeleCom Mobile', mcc: '4814', minMinor: 1_500, maxMinor: 5_000 },
  { name: 'ByteShop Electronics', mcc: '5732', minMinor: 2_000, maxMinor: 60_000 },
  { name: 'PageTurner Books', mcc: '5942', minMinor: 900, maxMinor: 4_500 },
  { name: 'StreamFlix', mcc: '4899', minMinor: 799, maxMinor: 1_799 },
  { name: 'PharmaPlus', mcc: '5912', minMinor: 400, maxMinor: 6_000 },
  { name: 'Cash machine', mcc: '6011', minMinor: 2_000, maxMinor: 20_000 },
];

const firstNames = ['Ada', 'Bruno', 'Chiara', 'Dmitri', 'Elif', 'Farid', 'Greta', 'Hiroshi', 'Ines', 'Jonas', 'Kaja', 'Luca'] as const;
const lastNames = ['Lovelace', 'Schulz', 'Rossi', 'Ivanov', 'Yilmaz', 'Haddad', 'Nilsson', 'Tanaka', 'Moreau', 'Berg', 'Novak', 'Conti'] as const;
const cities = ['Berlin', 'Hamburg', 'Munich', 'Cologne', 'Leipzig', 'Dresden'] as const;
const streets = ['Hauptstrasse', 'Gartenweg', 'Lindenallee', 'Bahnhofstrasse', 'Schillerplatz'] as const;
const currencies = ['EUR', 'EUR', 'EUR', 'GBP', 'CHF'] as const;
const products = ['Current account', 'Current account plus', 'Student account', 'Business account'] as const;

/** Transactions are dated back from here, so documents do not change with the clock. */
const newestBookingUnixMs = Date.UTC(2026, 0, 31, 18, 0, 0);
const dayMs = 86_400_000;

const digits = (random: () => number, count: number) => Array.from({ length: count }, () => randomInt(random, 0, 9)).join('');
const letters = (random: () => number, count: number) => Array.from({ length: count }, () => String.fromCharCode(65 + randomInt(random, 0, 25))).join('');
const iban = (random: () => number) => `DE${digits(random, 2)}${digits(random, 18)}`;

/** Pages of transactions an account has: 2 to 4. */
function pageCountOf(seed: number, bank: string, accountId: string): number {
  return randomInt(seededRandom(hashSeed(seed, bank, accountId, 'pages')), 2, 4);
}

function currencyOf(seed: number, bank: string, accountId: string): string {
  return pick(seededRandom(hashSeed(seed, bank, accountId, 'currency')), currencies);
}

export function accountDocument(seed: number, bank: string, accountId: string): BankAccount {
  const random = seededRandom(hashSeed(seed, bank, accountId, 'account'));
  const currency = currencyOf(seed, bank, accountId);
  const holder = `${pick(random, firstNames)} ${pick(random, lastNames)}`;
  const bookedMinor = randomInt(random, -50_000, 2_500_000);
  const at = new Date(newestBookingUnixMs).toISOString();
  return {
    id: accountId,
    bank,
    iban: iban(random),
    bic: `${letters(random, 4)}DE${letters(random, 2)}XXX`,
    currency,
    product: pick(random, products),
    openedAt: new Date(Date.UTC(2005 + randomInt(random, 0, 19), randomInt(random, 0, 11), randomInt(random, 1, 28))).toISOString().slice(0, 10),
    holder: {
      name: holder,
      address: { street: `${pick(random, streets)} ${randomInt(random, 1, 180)}`, postcode: digits(random, 5), city: pick(random, cities), country: 'DE' },
    },
    balances: [
      { type: 'booked', amountMinor: bookedMinor, at },
      { type: 'available', amountMinor: bookedMinor + 100_000, at },
      { type: 'expected', amountMinor: bookedMinor - randomInt(random, 0, 20_000), at },
    ],
    overdraftLimitMinor: pick(random, [0, 50_000, 100_000, 250_000]),
    cards: Array.from({ length: randomInt(random, 1, 3) }, (_, i) => ({
      id: `card-${accountId}-${i + 1}`,
      network: pick(random, ['visa', 'mastercard', 'girocard']),
      last4: digits(random, 4),
      status: pick(random, ['active', 'active', 'active', 'blocked']),
      expires: `${randomInt(random, 2026, 2031)}-${String(randomInt(random, 1, 12)).padStart(2, '0')}`,
    })),
    standingOrders: Array.from({ length: randomInt(random, 12, 24) }, (_, i) => ({
      id: `so-${accountId}-${i + 1}`,
      counterparty: `${pick(random, lastNames)} ${pick(random, ['Housing', 'Insurance', 'Savings', 'Sports Club', 'Kindergarten'])}`,
      iban: iban(random),
      amountMinor: -randomInt(random, 1_000, 150_000),
      dayOfMonth: randomInt(random, 1, 28),
      reference: `standing order ${letters(random, 6)} ${digits(random, 8)} for ${holder}`,
    })),
    transactionPages: pageCountOf(seed, bank, accountId),
  };
}

function transaction(
  random: () => number,
  index: number,
  bookedUnixMs: number,
  currency: string,
  idPrefix: string,
): Omit<BankTransaction, 'balanceAfterMinor'> {
  const bookedAt = new Date(bookedUnixMs).toISOString();
  const base = {
    id: `${idPrefix}-${String(index).padStart(3, '0')}`,
    bookedAt,
    valueDate: bookedAt.slice(0, 10),
    currency,
    reference: `${letters(random, 4)}${digits(random, 12)}`,
  };
  const status = bookedUnixMs > newestBookingUnixMs - 2 * dayMs && random() < 0.5 ? ('pending' as const) : ('booked' as const);
  const roll = random();
  if (roll < 0.04) {
    return {
      ...base,
      status,
      amountMinor: randomInt(random, 250_000, 450_000),
      counterparty: { name: 'ACME Industries GmbH', iban: iban(random) },
      description: `SALARY ${base.valueDate.slice(0, 7)} ACME INDUSTRIES`,
      merchantCategoryCode: null,
    };
  }
  if (roll < 0.08) {
    return {
      ...base,
      status,
      amountMinor: -randomInt(random, 80_000, 150_000),
      counterparty: { name: 'Housing Co', iban: iban(random) },
      description: `RENT ${base.valueDate.slice(0, 7)} FLAT ${digits(random, 3)}`,
      merchantCategoryCode: null,
    };
  }
  if (roll < 0.16) {
    const incoming = random() < 0.5;
    const name = `${pick(random, firstNames)} ${pick(random, lastNames)}`;
    return {
      ...base,
      status,
      amountMinor: (incoming ? 1 : -1) * randomInt(random, 1_000, 60_000),
      counterparty: { name, iban: iban(random) },
      description: `TRANSFER ${incoming ? 'FROM' : 'TO'} ${name.toUpperCase()}`,
      merchantCategoryCode: null,
    };
  }
  const merchant = pick(random, merchants);
  const refund = random() < 0.03;
  const city = pick(random, cities);
  return {
    ...base,
    status,
    amountMinor: (refund ? 1 : -1) * randomInt(random, merchant.minMinor, merchant.maxMinor),
    counterparty: { name: `${merchant.name} ${city}`, iban: null },
    description: `${refund ? 'REFUND' : 'CARD PAYMENT'} ${merchant.name.toUpperCase()} ${city.toUpperCase()} ${base.valueDate} CARD ${digits(random, 4)}`,
    merchantCategoryCode: merchant.mcc,
  };
}

/** Page `page` (from 1, newest first) of the account's transactions; past the last page it is empty. */
export function transactionsPageDocument(seed: number, bank: string, accountId: string, page: number): TransactionsPage {
  const pageCount = pageCountOf(seed, bank, accountId);
  const currency = currencyOf(seed, bank, accountId);
  const random = seededRandom(hashSeed(seed, bank, accountId, 'transactions', page));
  const count = page > pageCount ? 0 : randomInt(random, 80, 120);
  // Each page covers about a month, newest first; the running balance goes back in time.
  const pageStartUnixMs = newestBookingUnixMs - (page - 1) * 30 * dayMs;
  let balanceMinor = randomInt(random, 0, 2_000_000);
  const transactions: BankTransaction[] = [];
  for (let index = 0; index < count; index++) {
    const bookedUnixMs = pageStartUnixMs - Math.floor(((index + random()) * 30 * dayMs) / count);
    const drawn = transaction(random, index, bookedUnixMs, currency, `tx-${bank}-${accountId}-p${page}`);
    transactions.push({ ...drawn, balanceAfterMinor: balanceMinor });
    balanceMinor -= drawn.amountMinor;
  }
  return { accountId, page, pageCount, transactions, nextPage: page < pageCount ? page + 1 : null };
}
