"""`graphrag-engine export`: the index in other systems' formats (GraphML, GEXF, Neo4j CSV,
GraphRAG's output tables, a LightRAG working directory)."""
