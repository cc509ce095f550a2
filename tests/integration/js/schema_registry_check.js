// kafkajs' @kafkajs/confluent-schema-registry against a schema registry: node schema_registry_check.js URL
// Registers Avro, JSON Schema and Protobuf schemas, encodes and decodes with each; prints one line per step.
const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry')
const url = process.argv[2]
const registry = new SchemaRegistry({ host: url })
const results = []
async function step(name, fn) {
  try { await fn(); results.push([name, 'ok']) } catch (e) { results.push([name, 'FAIL ' + (e.message || e)]) }
}
;(async () => {
  const avro = { type: 'record', name: 'Js', namespace: 'kjs', fields: [{ name: 'n', type: 'string' }, { name: 'x', type: 'int' }] }
  let avroId
  await step('avro register', async () => { avroId = (await registry.register({ type: SchemaType.AVRO, schema: JSON.stringify(avro) }, { subject: 'kjs-avro' })).id })
  await step('avro encode/decode', async () => {
    const buf = await registry.encode(avroId, { n: 'hello', x: 7 })
    const out = await registry.decode(buf)
    if (out.n !== 'hello' || out.x !== 7) throw new Error(JSON.stringify(out))
  })
  await step('avro getLatestSchemaId', async () => { if ((await registry.getLatestSchemaId('kjs-avro')) !== avroId) throw new Error('id') })
  await step('avro getRegistryId', async () => { if ((await registry.getRegistryId('kjs-avro', 1)) !== avroId) throw new Error('id') })
  await step('avro incompatible refused', async () => {
    const bad = { ...avro, fields: [...avro.fields, { name: 'y', type: 'int' }] }
    try { await registry.register({ type: SchemaType.AVRO, schema: JSON.stringify(bad) }, { subject: 'kjs-avro' }) } catch (e) { if (/incompatible/.test(e.message)) return; throw e }
    throw new Error('accepted')
  })
  const json = { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', properties: { a: { type: 'string' } }, required: ['a'] }
  await step('json register+encode/decode', async () => {
    const { id } = await registry.register({ type: SchemaType.JSON, schema: JSON.stringify(json) }, { subject: 'kjs-json' })
    const out = await registry.decode(await registry.encode(id, { a: 'z' }))
    if (out.a !== 'z') throw new Error(JSON.stringify(out))
  })
  const proto = 'syntax = "proto3";\npackage kjs;\nmessage Msg { string a = 1; int32 b = 2; }\n'
  await step('protobuf register+encode/decode', async () => {
    const { id } = await registry.register({ type: SchemaType.PROTOBUF, schema: proto }, { subject: 'kjs-proto' })
    const out = await registry.decode(await registry.encode(id, { a: 'p', b: 3 }))
    if (out.a !== 'p' || out.b !== 3) throw new Error(JSON.stringify(out))
  })
  for (const [n, r] of results) console.log(n + ': ' + r)
  console.log(`${results.filter(r => r[1] === 'ok').length}/${results.length} ok`)
})()
