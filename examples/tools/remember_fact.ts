// A stored tool: remember a fact about someone in the knowledge graph (the memory backend),
// creating them if they are new, and say how many facts are now known about them.
export const meta = {
  description: "Remember a fact about a person in the knowledge graph and return everything known about them",
  input: {
    type: "object",
    properties: {
      person: { type: "string", minLength: 1 },
      fact: { type: "string", minLength: 1 },
    },
    required: ["person", "fact"],
    additionalProperties: false,
  },
  output: {
    type: "object",
    properties: {
      person: { type: "string" },
      facts: { type: "array", items: { type: "string" } },
      created: { type: "boolean" },
    },
    required: ["person", "facts", "created"],
  },
  capabilities: { tools: ["memory.open_nodes", "memory.create_entities", "memory.add_observations"] },
};

export default {
  async execute(input: { person: string; fact: string }, ctx: any) {
    const memory = ctx.tools.memory;
    const found = await memory.open_nodes({ names: [input.person] });
    const created = found.entities.length === 0;
    if (created) {
      await memory.create_entities({ entities: [{ name: input.person, entityType: "person", observations: [] }] });
    }
    await memory.add_observations({ observations: [{ entityName: input.person, contents: [input.fact] }] });
    const now = await memory.open_nodes({ names: [input.person] });
    ctx.log(`${input.person}: ${now.entities[0].observations.length} fact(s)`);
    return { person: input.person, facts: now.entities[0].observations, created };
  },
};
