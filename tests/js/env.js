// The broker the JS tests run against, from the environment with_broker.py sets (not a test file:
// `node --test` runs only *.test.js here).
'use strict';

// host:port of BROKER_URL (pulsar://host:port), else BROKER_HOST/BROKER_PORT (127.0.0.1:6650).
function brokerAddress() {
  if (process.env.BROKER_URL) {
    const u = new URL(process.env.BROKER_URL);
    return `${u.hostname}:${u.port || 6650}`;
  }
  return `${process.env.BROKER_HOST || '127.0.0.1'}:${process.env.BROKER_PORT || 6650}`;
}

module.exports = { BROKER: brokerAddress() };
