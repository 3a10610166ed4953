// The collector's event vocabulary (docs/qoe-events.schema.json, generated from the pydantic
// models by `make event-schema`), compiled with ajv: the probe's tests check every event the
// probe emits against it, so a drift between probe and collector fails here, not in Chromium.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

const schema = JSON.parse(readFileSync(new URL('../../docs/qoe-events.schema.json', import.meta.url), 'utf8'));
// pydantic writes OpenAPI's `discriminator` keyword for the event union: ajv understands it.
const ajv = new Ajv2020({ allErrors: true, strict: true, discriminator: true });
addFormats(ajv);
ajv.addSchema(schema);
const validators = {
  event: ajv.getSchema(`${schema.$id}#/$defs/Event`),
  session: ajv.getSchema(`${schema.$id}#/$defs/Session`),
  batch: ajv.getSchema(schema.$id),
};

function check(kind, value) {
  const validate = validators[kind];
  if (!validate(value)) {
    const problems = validate.errors.map((e) => `${e.instancePath || '/'} ${e.message}`).join('; ');
    assert.fail(`${kind} does not match docs/qoe-events.schema.json: ${problems}\n${JSON.stringify(value)}`);
  }
}

/** Fails the test when `event` (as the sender numbers it, with `seq`) breaks the contract. */
export function assertValidEvent(event) {
  check('event', event);
}

export function assertValidSession(session) {
  check('session', session);
}

export function assertValidBatch(batch) {
  check('batch', batch);
}
