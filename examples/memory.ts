// Write to the knowledge graph, read it back, and return only what matters.
// Run: sandgate run examples/memory.ts --config examples/sandgate.toml
interface Entity { name: string; entityType: string; observations: string[] }

export default async function main() {
  const people: Entity[] = [
    { name: "Ada", entityType: "person", observations: ["wrote the first program"] },
    { name: "Grace", entityType: "person", observations: ["invented the compiler"] },
  ];
  await memory.create_entities({ entities: people });
  const found = await memory.search_nodes({ query: "compiler" });
  const names = (found.entities as Entity[]).map((e) => e.name);
  console.info(`found ${names.length} matching entities`);
  return { names };
}
