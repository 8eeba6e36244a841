import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { ChargeReceipt, PricedCall } from '#core/billing';
import type { Caller } from '#core/identity';
import { requireAuth } from '../plugins/auth.js';
import { chargeRequest } from './charge.js';

/**
 * The door a call came in through: who is calling, and how a priced item is charged. REST charges
 * with X-Max-Cost or x402 and answers with X-Service-* headers (`restDoor`); MCP charges with the
 * tool's maxCost and answers the charge in the result's `_meta` (mcp/dispatch.ts).
 */
export interface Door {
  caller: Caller;
  /** The caller when the request carried credentials, else null (public routes answer anonymous callers too). */
  readonly callerIfAny: Caller | null;
  charge(call: PricedCall): Promise<ChargeReceipt>;
  /**
   * Which door this is, for answers written in words (instructions): an MCP tool caller is told
   * about tools and their arguments, a REST caller about routes and headers. Absent: REST.
   */
  readonly via?: 'rest' | 'mcp';
}

/**
 * The REST door of a request. The caller is read when the operation asks for it, so a public
 * route's operation (one that never does) runs for an anonymous request too.
 */
export function restDoor(request: FastifyRequest, reply: FastifyReply): Door {
  return {
    get caller() {
      return requireAuth(request);
    },
    get callerIfAny() {
      return request.auth;
    },
    charge: (call) => chargeRequest(request, reply, call),
  };
}

/** The zod schemas a route validates with; the operation's MCP tool validates its arguments with the same ones. */
export interface OperationSchemas {
  params?: z.ZodType;
  querystring?: z.ZodType;
  body?: z.ZodType;
  /** Request headers the operation reads (an Idempotency-Key); its tool takes each as a named argument (RouteTool.headerArgs). */
  headers?: z.ZodType;
}

type Parsed<S> = S extends z.ZodType ? z.output<S> : unknown;

/** An operation's validated input, shaped like a Fastify request so a route handler passes `request` itself. */
export interface OperationInput<S extends OperationSchemas> {
  params: Parsed<S['params']>;
  query: Parsed<S['querystring']>;
  body: Parsed<S['body']>;
  headers: Parsed<S['headers']>;
}

/**
 * One thing a resource does, reachable through REST and MCP alike: the route registers `schemas`
 * and answers what `run` returns; the tool validates its arguments with `schemas` and answers the
 * same body. `run` calls core; prices are charged through `door.charge`, so both doors pay alike.
 */
export interface Operation<S extends OperationSchemas = OperationSchemas, Body extends object = object> {
  schemas: S;
  run(app: FastifyInstance, door: Door, input: OperationInput<S>): Promise<Body>;
}

export function operation<S extends OperationSchemas, Body extends object>(schemas: S, run: Operation<S, Body>['run']): Operation<S, Body> {
  return { schemas, run };
}
