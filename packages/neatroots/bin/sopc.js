#!/usr/bin/env node
'use strict';
require('./failure.js').runCli('sopc', () => require('../dist/sopc.js').main(process.argv.slice(2)));
