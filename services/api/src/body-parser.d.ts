// The two parsers of body-parser the api uses (the package ships no types; @types/body-parser
// would bring express's types along).
declare module 'body-parser' {
  type Middleware = (req: unknown, res: unknown, next: (err?: unknown) => void) => void;
  interface Options {
    limit?: number | string;
    type?: string | string[] | ((req: unknown) => boolean);
  }
  export function json(opts?: Options & { strict?: boolean }): Middleware;
  export function text(opts?: Options & { defaultCharset?: string }): Middleware;
}
