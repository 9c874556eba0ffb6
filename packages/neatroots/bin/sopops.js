#!/usr/bin/env node
'use strict';
require('./failure.js').runCli('sopops', () => require('../dist/sopops.js').main(process.argv.slice(2)));
