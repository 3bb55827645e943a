/**
 * The tasks of one cluster waiting for a slot on this balancer: user-present first, FIFO
 * within a priority. Removal of a waiter in the middle (deadline, cancel) is lazy: it is
 * marked done and skipped later, so every operation is O(1) amortised.
 *
 * A waiter that is done is let go of as soon as the head passes it, and the array is compacted
 * once the done waiters among the live ones outnumber them by maxDoneKept: a done waiter holds
 * its task's request, lease and promise, and keeping a thousand of them per queue made a
 * balancer's heap climb by megabytes between compactions.
 */
export interface Waiter {
  readonly priority: 'user' | 'background';
  /** Order of arrival on this balancer, across its clusters: a waiter moved into another queue takes its place by it. */
  readonly arrival: number;
  done: boolean;
}

/** The array is compacted once its done waiters outnumber its live ones by this many (or the cleared slots behind the head do). */
const maxDoneKept = 32;

class Fifo<T extends Waiter> {
  /** Entries before `head` are cleared (undefined): served or done, not referenced any more. */
  private items: (T | undefined)[] = [];
  private head = 0;
  live = 0;

  /** Waiters still referenced, live or done and not yet dropped: at most 2 x live + maxDoneKept after any operation. */
  get held(): number {
    return this.items.length - this.head;
  }

  push(item: T): void {
    this.items.push(item);
    this.live++;
  }

  peek(): T | undefined {
    while (this.head < this.items.length && this.items[this.head]!.done) this.items[this.head++] = undefined;
    this.compact();
    return this.items[this.head];
  }

  /** The newest live entry, removed (used to shed background work). */
  popNewest(): T | undefined {
    while (this.items.length > this.head) {
      const item = this.items.pop()!;
      if (!item.done) {
        this.live--;
        this.compact();
        return item;
      }
    }
    return undefined;
  }

  /** Adds items (oldest first) where their arrival puts them among the live ones. O(live + added). */
  insertInOrder(added: readonly T[]): void {
    const live = this.all();
    const merged: T[] = [];
    let i = 0;
    let j = 0;
    while (i < live.length || j < added.length) {
      if (j >= added.length || (i < live.length && live[i]!.arrival < added[j]!.arrival)) merged.push(live[i++]!);
      else merged.push(added[j++]!);
    }
    this.items = merged;
    this.head = 0;
    this.live += added.length;
  }

  markDone(item: T): void {
    if (item.done) return;
    item.done = true;
    this.live--;
    this.compact();
  }

  /** Up to `count` live entries from the head that `passOver` does not pass over, oldest first. O(entries looked at). */
  first(count: number, passOver?: (item: T) => boolean): T[] {
    const found: T[] = [];
    for (let i = this.head; i < this.items.length && found.length < count; i++) {
      const item = this.items[i]!;
      if (!item.done && !passOver?.(item)) found.push(item);
    }
    return found;
  }

  all(): T[] {
    return (this.items.slice(this.head) as T[]).filter((item) => !item.done);
  }

  private compact(): void {
    if (this.items.length - this.head > 2 * this.live + maxDoneKept) {
      // Done waiters in the middle (deadlines, cancels) outnumber the live ones.
      this.items = this.all();
      this.head = 0;
    } else if (this.head > maxDoneKept && this.head * 2 > this.items.length) {
      // The cleared slots behind the head are most of the array: O(1) amortised.
      this.items = this.items.slice(this.head);
      this.head = 0;
    }
  }
}

export class WaitQueue<T extends Waiter> {
  private readonly user = new Fifo<T>();
  private readonly background = new Fifo<T>();

  get userPresentCount(): number {
    return this.user.live;
  }

  get backgroundCount(): number {
    return this.background.live;
  }

  get size(): number {
    return this.user.live + this.background.live;
  }

  /** Waiters still referenced, live or done and not yet dropped (bounded: see Fifo.held). */
  get held(): number {
    return this.user.held + this.background.held;
  }

  push(waiter: T): void {
    (waiter.priority === 'user' ? this.user : this.background).push(waiter);
  }

  /** The waiter to serve next: the oldest user-present one, else the oldest background one. */
  peek(): T | undefined {
    return this.user.peek() ?? this.background.peek();
  }

  /**
   * The next waiters to serve in one batch of reservations, up to `count`: user-present ones
   * while any is not passed over, else background ones. `passOver` skips waiters that cannot be
   * served now (their integration is at its limit), so they hold up nobody behind them.
   */
  nextBatch(count: number, passOver?: (waiter: T) => boolean): T[] {
    this.peek();
    const user = this.user.first(count, passOver);
    return user.length > 0 ? user : this.background.first(count, passOver);
  }

  /** Adds waiters taken from another queue (oldest first within a priority), each in its place by arrival. */
  insertInOrder(waiters: readonly T[]): void {
    const user = waiters.filter((w) => w.priority === 'user');
    const background = waiters.filter((w) => w.priority !== 'user');
    if (user.length > 0) this.user.insertInOrder(user);
    if (background.length > 0) this.background.insertInOrder(background);
  }

  remove(waiter: T): void {
    (waiter.priority === 'user' ? this.user : this.background).markDone(waiter);
  }

  /** Removes and returns the newest background waiter, if any. */
  shedNewestBackground(): T | undefined {
    const shed = this.background.popNewest();
    if (shed) shed.done = true;
    return shed;
  }

  /** Removes and returns the live waiters `selects` picks, oldest first within each priority. */
  removeWhere(selects: (waiter: T) => boolean): T[] {
    const picked = [...this.user.all(), ...this.background.all()].filter(selects);
    for (const waiter of picked) this.remove(waiter);
    return picked;
  }

  removeAll(): T[] {
    const all = [...this.user.all(), ...this.background.all()];
    for (const waiter of all) this.remove(waiter);
    return all;
  }
}
