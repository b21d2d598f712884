/* The floor of a module command, for bench/bench.py: what a Bloom command
 * costs on this server before it does any Bloom work. bench reports each
 * module's commands as ratios to these, measured back to back on one server.
 *
 * FLOOR.EXISTS key item            opens the key, looks at its type, replies 0
 * FLOOR.MEXISTS key item [item...] the same, replying one 0 per item
 * FLOOR.MADD key item [item...]    opens the key for writing, replies one 0
 *                                  per item and replicates the command, as
 *                                  every write that changed something must
 *
 * The items' bytes are not read (a pointer fetch each), so a floor is a touch
 * lower than any real command's. */
#include "redismodule.h"

static int LookAtKey(RedisModuleCtx *ctx, RedisModuleString *name, int mode) {
    RedisModuleKey *key = RedisModule_OpenKey(ctx, name, mode);
    int type = RedisModule_KeyType(key);
    RedisModule_CloseKey(key);
    return type;
}

static int FloorExists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    (void)LookAtKey(ctx, argv[1], REDISMODULE_READ);
    return RedisModule_ReplyWithLongLong(ctx, 0);
}

static int FloorMulti(RedisModuleCtx *ctx, RedisModuleString **argv, int argc, int mode) {
    if (argc < 3) return RedisModule_WrongArity(ctx);
    (void)LookAtKey(ctx, argv[1], mode);
    RedisModule_ReplyWithArray(ctx, argc - 2);
    for (int i = 2; i < argc; i++) RedisModule_ReplyWithLongLong(ctx, 0);
    return REDISMODULE_OK;
}

static int FloorMexists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    return FloorMulti(ctx, argv, argc, REDISMODULE_READ);
}

static int FloorMadd(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    int status = FloorMulti(ctx, argv, argc, REDISMODULE_READ | REDISMODULE_WRITE);
    if (argc >= 3) RedisModule_ReplicateVerbatim(ctx);
    return status;
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "floor", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR) return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.exists", FloorExists, "readonly fast", 1, 1, 1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    if (RedisModule_CreateCommand(ctx, "floor.mexists", FloorMexists, "readonly fast", 1, 1, 1) == REDISMODULE_ERR)
        return REDISMODULE_ERR;
    return RedisModule_CreateCommand(ctx, "floor.madd", FloorMadd, "write deny-oom", 1, 1, 1);
}
