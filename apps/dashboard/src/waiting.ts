/**
 * The window event by which the Inbox page tells the top bar how many human steps it has just read
 * waiting (`detail`: the count), so the Inbox badge agrees with the page at once, between its polls.
 */
export const WAITING_STEPS_EVENT = 'waiting-steps';
