'use strict';
// A database of a bench's own on the Postgres server of `url` (NEATROOTS_PG_URL), dropped after:
// the benches that write to Postgres never touch another run's tables or the tests'.
const { openPostgres } = require('@neatroots/platform');

/** Creates database `name`; resolves to its URL and a drop() that removes it (connections left open are closed). */
async function scratchDatabase(url, name) {
  const admin = await openPostgres({ url, max: 1 });
  try {
    await admin.exec(`CREATE DATABASE ${name}`);
  } catch (e) {
    await admin.close();
    throw e;
  }
  const own = new URL(url);
  own.pathname = `/${name}`;
  return {
    url: own.toString(),
    drop: async () => {
      try {
        await admin.exec(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await admin.close();
      }
    },
  };
}

module.exports = { scratchDatabase };
