// The messages between the bench and the services it starts (bench/child.ts).
export type ParentMessage =
  | { type: 'cpu'; id: number }
  | { type: 'stop' }

export type ChildMessage =
  | { type: 'ready'; url: string; pid: number; decisionUrl?: string }
  | { type: 'cpu'; id: number; user: number; system: number }
